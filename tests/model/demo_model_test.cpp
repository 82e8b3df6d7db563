// The demo pair: written once under the cache root from the bytes embedded
// in the binary, reused, repaired when damaged, and safe to create from
// several processes at once.

#include "model/demo_model.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>

#include "model/checkpoint.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::temp_dir;

ino_t inode_of(const std::filesystem::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_ino;
}

std::vector<std::string> entries_of(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

TEST(DemoModel, CreatedOnceThenReused) {
  temp_dir root;
  const std::filesystem::path first = ensure_demo_model(root.path());
  const ino_t weights_inode = inode_of(first / "model.safetensors");
  const std::filesystem::path second = ensure_demo_model(root.path());
  EXPECT_EQ(first, second);
  EXPECT_EQ(inode_of(second / "model.safetensors"), weights_inode);  // not rewritten
  EXPECT_EQ(entries_of(root.path()).size(), 1u);
  EXPECT_EQ(first.filename(), "troupe-demo-en");  // the served model name
  EXPECT_EQ(ensure_demo_draft_model(root.path()), first.parent_path() / "troupe-demo-en-draft");
  EXPECT_EQ(entries_of(root.path()).size(), 1u);  // one directory holds the pair
}

TEST(DemoModel, DamagedCopyIsRebuiltIdentically) {
  temp_dir root;
  const std::filesystem::path path = ensure_demo_model(root.path());
  const std::string weights = testing::read_file(path / "model.safetensors");
  std::filesystem::remove(path / "model.safetensors");
  EXPECT_EQ(ensure_demo_model(root.path()), path);
  EXPECT_EQ(testing::read_file(path / "model.safetensors"), weights);
  EXPECT_EQ(entries_of(root.path()).size(), 1u);
  // A truncated file is damage too.
  const std::filesystem::path draft = ensure_demo_draft_model(root.path());
  const std::string draft_weights = testing::read_file(draft / "model.safetensors");
  std::filesystem::resize_file(draft / "model.safetensors", 100);
  EXPECT_EQ(ensure_demo_draft_model(root.path()), draft);
  EXPECT_EQ(testing::read_file(draft / "model.safetensors"), draft_weights);
}

TEST(DemoModel, ConcurrentProcessesAgreeOnOneCompleteCopy) {
  temp_dir root;
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        ensure_demo_model(root.path());
      } catch (...) {
        status = 1;
      }
      std::_Exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(entries_of(root.path()).size(), 1u);  // the staging copies of the losers are gone
  const checkpoint target = checkpoint::open(ensure_demo_model(root.path()), {.show_progress = false});
  const checkpoint draft = checkpoint::open(ensure_demo_draft_model(root.path()), {.show_progress = false});
  EXPECT_GT(target.weights().layers.size(), draft.weights().layers.size());
}

TEST(DemoModel, DefaultLocationFollowsXdgCacheHome) {
  temp_dir root;
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", root.path().c_str(), 1);
  EXPECT_EQ(demo_model_path().parent_path().parent_path(), root.path() / "troupe");
  const std::filesystem::path path = ensure_demo_model();
  EXPECT_TRUE(std::filesystem::exists(path / "config.json"));
  if (old) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
}

}  // namespace
}  // namespace troupe

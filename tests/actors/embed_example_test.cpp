// Runs tools/examples/embed and checks what it streamed: both entry points
// accept the request, stream text deltas, finish with reason `length` after
// the asked tokens, and (greedy) produce the same text as the tokenizer's
// decode of the reference tokens.

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "engine_fixture.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe {
namespace {

std::vector<std::string> run_example(const std::string& args) {
  const std::string command = std::string(TROUPE_BINARY_DIR) + "/tools/examples/embed/troupe_embed_example " + args;
  std::vector<std::string> lines;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  char buffer[4096];
  std::string line;
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) {
    line += buffer;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      lines.push_back(line);
      line.clear();
    }
  }
  EXPECT_EQ(::pclose(pipe), 0);
  return lines;
}

// The example escapes text as "..."; this undoes it.
std::string unquote(const std::string& text) {
  std::string out;
  for (std::size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == '\\' && text[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(text.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else if (text[i] == '\\') {
      out += text[++i];
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string expected_text(int max_tokens) {
  const auto tokenizer = text::tokenizer::load(testing::tiny_model_dir());
  checkpoint_options options;
  options.show_progress = false;
  const checkpoint ckpt = checkpoint::open(testing::tiny_model_dir(), options);
  auto cpu = make_backend("cpu", 2);
  llama_model model(ckpt.config(), ckpt.weights(), *cpu);
  batch_runner runner(model, runner_options{});
  runner_request r;
  r.prompt = tokenizer->encode("The troupe performs", true);
  r.params.temperature = 0.0f;
  r.max_tokens = max_tokens;
  return tokenizer->decode(runner.generate({r})[0].tokens, true);
}

TEST(EmbedExample, BothEntryPointsStreamTheReferenceText) {
  const auto lines = run_example(testing::tiny_model_dir().string() + " 9");
  const std::string expected = expected_text(9);
  for (const std::string prefix : {"callbacks ", "actor "}) {
    std::string text;
    bool accepted = false;
    std::string finished;
    for (const auto& line : lines) {
      if (line.rfind(prefix, 0) != 0) continue;
      const std::string rest = line.substr(prefix.size());
      if (rest.rfind("accepted ", 0) == 0) accepted = true;
      if (rest.rfind("delta ", 0) == 0) text += unquote(rest.substr(6));
      if (rest.rfind("finished ", 0) == 0) finished = rest.substr(9);
    }
    EXPECT_TRUE(accepted) << prefix;
    EXPECT_EQ(finished, "length 9") << prefix;
    EXPECT_EQ(text, expected) << prefix;
  }
}

}  // namespace
}  // namespace troupe

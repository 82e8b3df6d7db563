// The operator's console over a real socket: the page, the live settings
// and gauges, and validated changes reaching the engine.

#include <algorithm>
#include <boost/json/parse.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "config/config_store.hpp"
#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using AdminServer = server_fixture;

http_response patch(std::uint16_t port, const std::string& body, const std::string& headers = {}) {
  return http_call(port, {.method = "PATCH", .path = "/admin/config", .body = body, .extra_headers = headers});
}

TEST_F(AdminServer, ThePageIsSelfContainedHtmlOnTheAdminApi) {
  const http_response page = get("/admin");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers.at("content-type"), "text/html; charset=utf-8");
  for (const char* uses : {"\"/admin/config\"", "\"PATCH\"", "/admin/stream", "/admin/snapshot", "/admin/audit",
                           "/admin/requests/", "/abort", "/priority", "createElement(\"canvas\")", "tokens/s"}) {
    EXPECT_NE(page.body.find(uses), std::string::npos) << uses;
  }
  EXPECT_EQ(page.body.find("src="), std::string::npos) << "no external assets";
  EXPECT_EQ(page.body.find("http://"), std::string::npos) << "no external assets";
  EXPECT_EQ(page.body.find("https://"), std::string::npos) << "no external assets";
}

TEST_F(AdminServer, TheConfigCarriesSettingsLiveKnobsAndGauges) {
  engine.set_kv_usage(0.5);
  const http_response response = get("/admin/config");
  ASSERT_EQ(response.status, 200);
  const boost::json::value body = boost::json::parse(response.body);
  EXPECT_EQ(body.at("settings").at("policy").as_string(), "fcfs");
  EXPECT_EQ(body.at("settings").at("max_num_seqs").as_int64(), 256);
  const auto live = all_knobs();
  const auto live_count = std::count_if(live.begin(), live.end(), [](const knob_spec& knob) { return knob.live; });
  EXPECT_EQ(body.at("live_settings").as_array().size(), static_cast<std::size_t>(live_count));
  EXPECT_DOUBLE_EQ(body.at("stats").at("kv_cache_usage").as_double(), 0.5);
  EXPECT_TRUE(body.at("stats").at("healthy").as_bool());
}

TEST_F(AdminServer, AValidChangeReachesTheEngineAndIsReported) {
  const http_response response = patch(port, R"({"policy":"mlfq","max_num_seqs":32,"preemption_mode":"swap"})");
  ASSERT_EQ(response.status, 200) << response.body;
  const auto changes = engine.configured();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].policy, std::optional<std::string>("mlfq"));
  EXPECT_EQ(changes[0].max_num_seqs, std::optional<int>(32));
  EXPECT_EQ(changes[0].preemption_mode, std::optional<std::string>("swap"));
  EXPECT_FALSE(changes[0].max_num_batched_tokens.has_value()) << "fields not sent stay as they are";
  const boost::json::value body = boost::json::parse(response.body);
  EXPECT_EQ(body.at("settings").at("policy").as_string(), "mlfq");
  EXPECT_EQ(boost::json::parse(get("/admin/config").body).at("settings").at("max_num_seqs").as_int64(), 32);
}

TEST_F(AdminServer, TheConfigDescribesEachLiveKnobFromTheRegistry) {
  const boost::json::value body = boost::json::parse(get("/admin/config").body);
  const boost::json::value& quantum = body.at("knobs").at("mlfq_quantum");
  EXPECT_EQ(quantum.at("min").as_double(), knob_defaults().spec("mlfq_quantum").min.value());
  EXPECT_EQ(quantum.at("unit").as_string(), "steps");
  EXPECT_EQ(body.at("knobs").at("policy").at("choices").as_array().size(), 5u);
  EXPECT_FALSE(body.at("knobs").at("block_size").at("live").as_bool()) << "restart-only knobs are listed too";
  EXPECT_EQ(body.at("knobs").at("block_size").at("value").as_int64(), 16);
}

TEST_F(AdminServer, TheSpeculativeDecodingKnobsChangeLive) {
  const boost::json::value knobs = boost::json::parse(get("/admin/config").body).at("knobs");
  EXPECT_EQ(knobs.at("speculative_adaptive").at("choices").as_array().size(), 2u) << "a boolean is a select";
  EXPECT_EQ(knobs.at("num_speculative_tokens").at("max").as_double(), 16);
  const http_response response =
      patch(port, R"({"num_speculative_tokens":4,"speculative_adaptive":"false","speculative_max_batch":8})");
  ASSERT_EQ(response.status, 200) << response.body;
  const auto changes = engine.configured();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].num_speculative_tokens, std::optional<int>(4));
  EXPECT_EQ(changes[0].speculative_adaptive, std::optional<bool>(false));
  EXPECT_EQ(changes[0].speculative_max_batch, std::optional<int>(8));
  const boost::json::value settings = boost::json::parse(get("/admin/config").body).at("settings");
  EXPECT_EQ(settings.at("num_speculative_tokens").as_int64(), 4);
  EXPECT_FALSE(settings.at("speculative_adaptive").as_bool());
  EXPECT_EQ(patch(port, R"({"num_speculative_tokens":17})").status, 400);
}

TEST_F(AdminServer, TheMlfqQuantumChangesLive) {
  EXPECT_EQ(boost::json::parse(get("/admin/config").body).at("settings").at("mlfq_quantum").as_int64(),
            knob_defaults().get_int("mlfq_quantum"));
  const http_response response = patch(port, R"({"mlfq_quantum":4})");
  ASSERT_EQ(response.status, 200) << response.body;
  const auto changes = engine.configured();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].mlfq_quantum, std::optional<int>(4));
  EXPECT_EQ(boost::json::parse(get("/admin/config").body).at("settings").at("mlfq_quantum").as_int64(), 4);
}

TEST_F(AdminServer, BadChangesNameTheFieldAndChangeNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"policy":"lifo"})", "policy"},
      {R"({"max_num_seqs":0})", "max_num_seqs"},
      {R"({"max_num_seqs":"many"})", "max_num_seqs"},
      {R"({"max_num_batched_tokens":1.5})", "max_num_batched_tokens"},
      {R"({"max_num_seqs":[4]})", "max_num_seqs"},
      {R"({"block_size":32})", "block_size"},  // exists, but only at start-up
      {R"({"frobnicate":1})", "frobnicate"},
      {R"({"policy":"mlfq","max_waiting_requests":-5})", "max_waiting_requests"},
      {R"({"mlfq_quantum":0})", "mlfq_quantum"},
      {R"({"policy":"mlfq","mlfq_quantum":"short"})", "mlfq_quantum"},
  };
  for (const auto& [body, field] : cases) {
    const http_response response = patch(port, body);
    EXPECT_EQ(response.status, 400) << body;
    EXPECT_EQ(error_of(response).at("param").as_string(), field) << body;
  }
  EXPECT_EQ(patch(port, "[1]").status, 400);
  EXPECT_TRUE(engine.configured().empty());
  EXPECT_EQ(boost::json::parse(get("/admin/config").body).at("settings").at("policy").as_string(), "fcfs");
}

TEST_F(AdminServer, AChangeTheEngineRefusesIs409) {
  const http_response response = patch(port, R"({"max_num_seqs":5000})");
  EXPECT_EQ(response.status, 409);
  EXPECT_EQ(error_of(response).at("code").as_string(), "setting_refused");
}

TEST_F(AdminServer, AnApiKeyNeverOpensTheAdminEndpoints) {
  api::server_config config = test_server_config();
  config.api_key = "secret";
  start(config);
  EXPECT_EQ(get("/admin/config", "Authorization: Bearer secret\r\n").status, 200)
      << "without an admin token, loopback is what opens /admin, not the key";
  config.admin_token = "admin-secret";
  start(config);
  EXPECT_EQ(get("/admin").status, 200) << "the page holds no data; it asks for the token";
  EXPECT_EQ(get("/admin/config").status, 401);
  EXPECT_EQ(get("/admin/config", "Authorization: Bearer secret\r\n").status, 401) << "the API key is not the token";
  EXPECT_EQ(error_of(get("/admin/requests", "Authorization: Bearer nope\r\n")).at("code").as_string(),
            "invalid_admin_token");
  EXPECT_EQ(patch(port, R"({"max_num_seqs":8})", "Authorization: Bearer secret\r\n").status, 401);
  EXPECT_TRUE(engine.configured().empty()) << "a refused change has no effect";
  EXPECT_EQ(patch(port, R"({"max_num_seqs":8})", "Authorization: Bearer admin-secret\r\n").status, 200);
  EXPECT_EQ(get("/admin/audit", "Authorization: Bearer admin-secret\r\n").status, 200);
  EXPECT_EQ(
      post("/v1/completions", R"({"prompt":"hi","max_tokens":2})", "Authorization: Bearer admin-secret\r\n").status,
      401)
      << "and the admin token is not an API key";
}

TEST_F(AdminServer, DisabledAdminIsNotFound) {
  api::server_config config = test_server_config();
  config.admin_enabled = false;
  start(config);
  EXPECT_EQ(get("/admin").status, 404);
  EXPECT_EQ(get("/admin/config").status, 404);
}

TEST_F(AdminServer, RequestsAreListedAbortedAndReprioritisedWithAnAuditTrail) {
  const std::string id = "admin-test-1";
  std::thread client([&] {
    http_call(port, {.method = "POST",
                     .path = "/v1/completions",
                     .body = R"({"prompt":"endless","max_tokens":5,"stream":true})",
                     .extra_headers = "X-Request-Id: " + id + "\r\n"});
  });
  ASSERT_TRUE(fake_engine::eventually([&] { return !engine.list_requests().empty(); }));
  const std::string live_id = engine.list_requests().front().id;
  const boost::json::value table = boost::json::parse(get("/admin/requests").body);
  ASSERT_EQ(table.at("requests").as_array().size(), 1u);
  EXPECT_EQ(table.at("requests").at(0).at("id").as_string(), live_id);
  EXPECT_EQ(table.at("requests").at(0).at("state").as_string(), "decoding");
  const std::string base = "/admin/requests/" + live_id;
  EXPECT_EQ(post(base + "/priority", R"({"priority":"high"})").status, 400);
  EXPECT_EQ(post(base + "/priority", R"({"priority":-7})").status, 200);
  EXPECT_EQ(engine.list_requests().front().priority, -7);
  EXPECT_EQ(post("/admin/requests/nobody/abort", "").status, 404);
  EXPECT_EQ(get(base + "/abort").status, 405);
  EXPECT_EQ(post(base + "/abort", "").status, 200);
  client.join();
  EXPECT_EQ(engine.cancelled(), std::vector<std::string>{live_id});
  const boost::json::value audit = boost::json::parse(get("/admin/audit").body);
  const boost::json::array& entries = audit.at("entries").as_array();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].at("action").as_string(), "priority");
  EXPECT_EQ(entries[0].at("from").as_string(), "0");
  EXPECT_EQ(entries[0].at("to").as_string(), "-7");
  EXPECT_EQ(entries[1].at("action").as_string(), "abort");
  EXPECT_EQ(entries[1].at("who").as_string(), "loopback@127.0.0.1");
}

TEST_F(AdminServer, ChangesAreAuditedWithTheirPreviousValue) {
  ASSERT_EQ(patch(port, R"({"max_num_batched_tokens":64,"policy":"priority"})").status, 200);
  EXPECT_EQ(patch(port, R"({"max_num_batched_tokens":0})").status, 400);
  const boost::json::array entries = boost::json::parse(get("/admin/audit").body).at("entries").as_array();
  ASSERT_EQ(entries.size(), 2u) << "one per knob changed, none for the refused change";
  EXPECT_EQ(entries[0].at("target").as_string(), "max_num_batched_tokens");
  EXPECT_EQ(entries[0].at("from").as_string(), "2048");
  EXPECT_EQ(entries[0].at("to").as_string(), "64");
  const boost::json::value config = boost::json::parse(get("/admin/config").body);
  EXPECT_EQ(config.at("knobs").at("policy").at("source").as_string(), "runtime");
}

TEST_F(AdminServer, SaveWritesTheLiveSettingsBackToTheConfigFile) {
  EXPECT_EQ(error_of(post("/admin/config/save", "")).at("code").as_string(), "no_config_file");
  const std::string file = ::testing::TempDir() + "troupe-admin-save.json";
  {
    std::ofstream out(file);
    out << R"({"port": 8123, "max_num_seqs": 5})";
  }
  api::server_config config = test_server_config();
  config.config_file = file;
  start(config);
  ASSERT_EQ(patch(port, R"({"max_num_seqs":12,"admission_watermark":0.2})").status, 200);
  ASSERT_EQ(post("/admin/config/save", "").status, 200);
  config_store reloaded(all_knobs());
  reloaded.load_file(file);
  EXPECT_EQ(reloaded.get_int("port"), 8123) << "other entries are kept";
  EXPECT_EQ(reloaded.get_int("max_num_seqs"), 12);
  EXPECT_DOUBLE_EQ(reloaded.get_real("admission_watermark"), 0.2);
  std::filesystem::remove(file);
}

TEST_F(AdminServer, TheStreamNeedsAnUpgradeAndTheSnapshotCarriesTheCharts) {
  EXPECT_EQ(get("/admin/stream").status, 426);
  const boost::json::value first = boost::json::parse(get("/admin/snapshot").body);
  EXPECT_TRUE(first.at("gauges").at("healthy").as_bool());
  EXPECT_EQ(first.at("settings").at("policy").as_string(), "fcfs");
  const boost::json::value second = boost::json::parse(get("/admin/snapshot").body);
  EXPECT_GT(second.at("interval_s").as_double(), 0.0);
  EXPECT_DOUBLE_EQ(second.at("rates").at("generation_tokens_per_s").as_double(), 0.0);
}

}  // namespace
}  // namespace troupe::testing

// The operator's console over a real socket: the page, the live settings
// and gauges, and validated changes reaching the engine.

#include <algorithm>
#include <boost/json/parse.hpp>

#include "config/config_store.hpp"
#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using AdminServer = server_fixture;

http_response patch(std::uint16_t port, const std::string& body, const std::string& headers = {}) {
  return http_call(port, {.method = "PATCH", .path = "/admin/config", .body = body, .extra_headers = headers});
}

TEST_F(AdminServer, ThePageIsSelfContainedHtmlThatPollsTheConfig) {
  const http_response page = get("/admin");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers.at("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("fetch(\"/admin/config\""), std::string::npos);
  EXPECT_NE(page.body.find("method: \"PATCH\""), std::string::npos);
  EXPECT_EQ(page.body.find("src=\"http"), std::string::npos) << "no external assets";
}

TEST_F(AdminServer, TheConfigCarriesSettingsLiveKnobsAndGauges) {
  engine.set_kv_usage(0.5);
  const http_response response = get("/admin/config");
  ASSERT_EQ(response.status, 200);
  const boost::json::value body = boost::json::parse(response.body);
  EXPECT_EQ(body.at("settings").at("policy").as_string(), "fcfs");
  EXPECT_EQ(body.at("settings").at("max_num_seqs").as_int64(), 256);
  const auto live = engine_knobs();
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
  EXPECT_FALSE(body.at("knobs").as_object().contains("block_size")) << "only live knobs";
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

TEST_F(AdminServer, SettingsNeedTheApiKeyThePageDoesNot) {
  api::server_config config = test_server_config();
  config.api_key = "secret";
  start(config);
  EXPECT_EQ(get("/admin").status, 200);
  EXPECT_EQ(get("/admin/config").status, 401);
  EXPECT_EQ(patch(port, R"({"max_num_seqs":8})").status, 401);
  EXPECT_EQ(patch(port, R"({"max_num_seqs":8})", "Authorization: Bearer secret\r\n").status, 200);
  EXPECT_EQ(get("/admin/config", "Authorization: Bearer secret\r\n").status, 200);
}

}  // namespace
}  // namespace troupe::testing

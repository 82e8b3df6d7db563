// The admin API's pure parts: access (token, loopback, start-up refusal),
// the knob description, change validation, the audit log and the
// snapshot's rates and latency quantiles.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <set>

#include "api/http/admin.hpp"
#include "api/http/admin_access.hpp"
#include "api/http/admin_snapshot.hpp"
#include "api/http/api_error.hpp"

namespace troupe::testing {
namespace {

api::http_request_view from(std::string address, std::string authorization = {}, std::string query = {}) {
  api::http_request_view view;
  view.method = "GET";
  view.path = "/admin/config";
  view.remote_address = std::move(address);
  view.authorization = std::move(authorization);
  view.query = std::move(query);
  return view;
}

int status_of(const api::http_request_view& request, std::string_view token,
              const std::vector<std::string>& allowed_origins = {}) {
  try {
    api::authorize_admin(request, token, allowed_origins);
    return 200;
  } catch (const api::api_error& error) {
    return error.status;
  }
}

TEST(AdminAccess, WithoutATokenOnlyLoopbackClientsGetIn) {
  EXPECT_EQ(status_of(from("127.0.0.1"), ""), 200);
  EXPECT_EQ(status_of(from("::1"), ""), 200);
  EXPECT_EQ(status_of(from("::ffff:127.0.0.5"), ""), 200);
  EXPECT_EQ(status_of(from("10.1.2.3"), ""), 403);
  EXPECT_EQ(status_of(from("::ffff:10.1.2.3"), ""), 403);
  EXPECT_EQ(status_of(from(""), ""), 403) << "an unknown address is not loopback";
  EXPECT_EQ(api::authorize_admin(from("127.0.0.1"), "", {}), "loopback@127.0.0.1");
}

TEST(AdminAccess, WithATokenEveryoneNeedsIt) {
  EXPECT_EQ(status_of(from("127.0.0.1"), "s3cret"), 401) << "loopback is not enough once a token is set";
  EXPECT_EQ(status_of(from("10.0.0.1", "Bearer s3cret"), "s3cret"), 200);
  EXPECT_EQ(status_of(from("10.0.0.1", "Bearer s3cre"), "s3cret"), 401);
  EXPECT_EQ(status_of(from("10.0.0.1", "Bearer s3cretX"), "s3cret"), 401);
  EXPECT_EQ(status_of(from("10.0.0.1", "s3cret"), "s3cret"), 401) << "not a bearer header";
  EXPECT_EQ(status_of(from("10.0.0.1", "", "a=1&token=s3cret"), "s3cret"), 200) << "the WebSocket's query form";
  EXPECT_EQ(status_of(from("10.0.0.1", "", "token=wrong"), "s3cret"), 401);
  EXPECT_EQ(api::authorize_admin(from("10.0.0.1", "Bearer s3cret"), "s3cret", {}), "admin_token@10.0.0.1");
}

api::http_request_view addressed(std::string host, std::string origin = {}, std::string address = "127.0.0.1") {
  api::http_request_view view = from(std::move(address));
  view.host = std::move(host);
  view.origin = std::move(origin);
  return view;
}

// DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1
// reaches the server from loopback, but its requests carry its own name.
TEST(AdminAccess, WithoutATokenTheHostHeaderMustNameLoopback) {
  EXPECT_EQ(status_of(addressed("localhost:8000"), ""), 200);
  EXPECT_EQ(status_of(addressed("LocalHost"), ""), 200);
  EXPECT_EQ(status_of(addressed("127.0.0.1:8000"), ""), 200);
  EXPECT_EQ(status_of(addressed("[::1]:8000"), ""), 200);
  EXPECT_EQ(status_of(addressed(""), ""), 200) << "HTTP/1.0 without Host";
  EXPECT_EQ(status_of(addressed("evil.example:8000"), ""), 403);
  EXPECT_EQ(status_of(addressed("127.0.0.1.evil.example"), ""), 403);
  EXPECT_EQ(status_of(addressed("127.0.0.1.evil"), ""), 403);
  EXPECT_EQ(status_of(addressed("127.0.0.256"), ""), 403);
  EXPECT_EQ(status_of(addressed("127.1"), ""), 403) << "short forms are not what a browser sends for loopback";
  EXPECT_EQ(status_of(addressed("127.3.2.1:80"), ""), 200);
  EXPECT_EQ(status_of(addressed("localhost.evil.example:8000"), ""), 403);
  api::http_request_view with_token = addressed("evil.example:8000");
  with_token.authorization = "Bearer t";
  EXPECT_EQ(status_of(with_token, "t"), 200) << "with a token, the name the client used does not matter";
}

TEST(AdminAccess, PagesOfOtherOriginsAreRefusedUnlessAllowed) {
  EXPECT_EQ(status_of(addressed("localhost:8000", "http://localhost:8000"), ""), 200) << "the console itself";
  EXPECT_EQ(status_of(addressed("localhost:8000", "http://evil.example"), ""), 403);
  EXPECT_EQ(status_of(addressed("localhost:8000", "null"), ""), 403) << "sandboxed frames and file pages";
  EXPECT_EQ(status_of(addressed("localhost:8000", "http://localhost:8001"), ""), 403) << "another port";
  EXPECT_EQ(status_of(addressed("localhost:8000", "https://console.example"), "", {"https://console.example"}), 200);
  EXPECT_EQ(status_of(addressed("localhost:8000", "https://other.example"), "", {"https://console.example"}), 403);
  EXPECT_EQ(status_of(addressed("localhost:8000", "https://other.example"), "", {"*"}), 200);
  api::http_request_view with_token = addressed("troupe.internal:8000", "http://evil.example", "10.0.0.9");
  with_token.authorization = "Bearer t";
  EXPECT_EQ(status_of(with_token, "t"), 403) << "a token does not make a cross-origin page welcome";
}

TEST(AdminAccess, SameOriginComparesHostAndPortWithDefaultPorts) {
  EXPECT_TRUE(api::same_origin("http://localhost:8000", "localhost:8000"));
  EXPECT_TRUE(api::same_origin("http://LOCALHOST:8000", "localhost:8000"));
  EXPECT_TRUE(api::same_origin("http://example.com", "example.com:80"));
  EXPECT_TRUE(api::same_origin("https://example.com:443", "example.com"));
  EXPECT_TRUE(api::same_origin("http://[::1]:8000", "[::1]:8000"));
  EXPECT_FALSE(api::same_origin("https://example.com", "example.com:80"));
  EXPECT_FALSE(api::same_origin("http://example.com:8000", "example.com:8001"));
  EXPECT_FALSE(api::same_origin("null", "example.com"));
  EXPECT_FALSE(api::same_origin("ftp://example.com", "example.com"));
  EXPECT_FALSE(api::same_origin("http://example.com", ""));
  EXPECT_EQ(api::parse_origin_list(" https://a.example, ,* "), (std::vector<std::string>{"https://a.example", "*"}));
  EXPECT_TRUE(api::parse_origin_list("").empty());
}

TEST(AdminAccess, SecretsCompareWholly) {
  EXPECT_TRUE(api::same_secret("abc", "abc"));
  EXPECT_FALSE(api::same_secret("ab", "abc"));
  EXPECT_FALSE(api::same_secret("abcd", "abc"));
  EXPECT_FALSE(api::same_secret("", "abc"));
  EXPECT_FALSE(api::same_secret("abd", "abc"));
}

TEST(AdminAccess, ANonLoopbackHostWithAdminAndNoTokenRefusesToStart) {
  EXPECT_EQ(api::admin_startup_problem("127.0.0.1", true, ""), "");
  EXPECT_EQ(api::admin_startup_problem("localhost", true, ""), "");
  EXPECT_EQ(api::admin_startup_problem("0.0.0.0", true, "t"), "");
  EXPECT_EQ(api::admin_startup_problem("0.0.0.0", false, ""), "");
  EXPECT_NE(api::admin_startup_problem("0.0.0.0", true, "").find("admin_token"), std::string::npos);
  EXPECT_NE(api::admin_startup_problem("::", true, ""), "");
  api::server_config config;
  config.host = "0.0.0.0";
  EXPECT_THROW(api::make_admin_context(config), std::runtime_error);
  config.admin_enabled = false;
  EXPECT_EQ(api::make_admin_context(config), nullptr);
}

TEST(AdminKnobs, EveryKnobIsDescribedAndEveryLiveKnobHasItsField) {
  const config_store knobs(all_knobs());
  const boost::json::object config = api::admin_config_json(engine_stats{}.settings, knobs);
  const boost::json::object& described = config.at("knobs").as_object();
  EXPECT_EQ(described.size(), knobs.specs().size());
  std::set<std::string> live_in_registry;
  for (const knob_spec& knob : knobs.specs()) {
    const boost::json::object& entry = described.at(knob.name).as_object();
    EXPECT_EQ(entry.at("live").as_bool(), knob.live) << knob.name;
    EXPECT_EQ(entry.at("help").as_string(), knob.help) << knob.name;
    EXPECT_TRUE(entry.contains("source")) << knob.name;
    EXPECT_EQ(entry.contains("value"), !knob.secret) << knob.name;
    if (knob.live) live_in_registry.insert(knob.name);
  }
  std::set<std::string> live_fields;
  for (const auto& [name, value] : api::live_setting_values(live_settings{})) live_fields.insert(name);
  for (const knob_spec& knob : knobs.specs())
    if (api::is_server_live_knob(knob)) live_fields.insert(knob.name);
  EXPECT_EQ(live_fields, live_in_registry)
      << "each live knob needs its live_settings field (or is the server's), and only those";
  EXPECT_EQ(described.at("swap_min_tokens").at("default").as_int64(), 256);
  EXPECT_EQ(described.at("admission_watermark").at("max").as_double(), 0.5);
  EXPECT_EQ(described.at("block_size").at("live").as_bool(), false);
}

TEST(AdminKnobs, SecretsAreNeverShown) {
  config_store knobs(all_knobs());
  knobs.set("admin_token", "hunter2", config_source::command_line);
  knobs.set("api_key", "sk-abc", config_source::command_line);
  const std::string text = boost::json::serialize(api::admin_config_json(live_settings{}, knobs));
  EXPECT_EQ(text.find("hunter2"), std::string::npos);
  EXPECT_EQ(text.find("sk-abc"), std::string::npos);
  const boost::json::value parsed = boost::json::parse(text);
  EXPECT_TRUE(parsed.at("knobs").at("admin_token").at("set").as_bool());
}

std::string rejected_field(const std::string& body) {
  try {
    api::parse_settings_change(boost::json::parse(body).as_object());
  } catch (const api::api_error& error) {
    EXPECT_EQ(error.status, 400) << body;
    return error.param + ": " + error.what();
  }
  return "accepted";
}

TEST(AdminKnobs, ChangesAreValidatedByTheRegistry) {
  EXPECT_EQ(rejected_field(R"({"admission_watermark":0.7})").rfind("admission_watermark: ", 0), 0u);
  EXPECT_NE(rejected_field(R"({"admission_watermark":0.7})").find("[0, 0.5]"), std::string::npos)
      << "the message names the allowed range";
  EXPECT_NE(rejected_field(R"({"block_size":32})").find("restart-only"), std::string::npos);
  EXPECT_EQ(rejected_field(R"({"port":9})").rfind("port: ", 0), 0u) << "server knobs are restart-only too";
  EXPECT_EQ(rejected_field(R"({"swap_min_tokens":"x"})").rfind("swap_min_tokens: ", 0), 0u);
  EXPECT_EQ(rejected_field(R"({"fair_output_weight":{}})").rfind("fair_output_weight: ", 0), 0u);
  EXPECT_EQ(rejected_field(R"({"max_num_seqs":4,"mlfq_levels":99})").rfind("mlfq_levels: ", 0), 0u);
  const settings_change change =
      api::parse_settings_change(
          boost::json::parse(R"({"mlfq_levels":3,"fair_prompt_weight":0.5,"preemption_grace_steps":0})").as_object())
          .engine;
  EXPECT_EQ(change.mlfq_levels, std::optional<int>(3));
  EXPECT_EQ(change.fair_prompt_weight, std::optional<double>(0.5));
  EXPECT_EQ(change.preemption_grace_steps, std::optional<int>(0));
  EXPECT_FALSE(change.max_num_seqs.has_value());
  const auto changed = api::changed_values(change);
  ASSERT_EQ(changed.size(), 3u);
  EXPECT_EQ(changed[0], (std::pair<std::string, std::string>{"mlfq_levels", "3"}));
}

TEST(AdminAudit, KeepsTheNewestEntriesInOrder) {
  api::audit_log log(2);
  log.record("loopback@127.0.0.1", "config", "max_num_seqs", "256", "8");
  log.record("admin_token@10.0.0.1", "abort", "req-1", "", "abort");
  log.record("admin_token@10.0.0.1", "priority", "req-2", "0", "-3");
  const boost::json::array entries = log.to_json();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].at("seq").as_uint64(), 2u);
  EXPECT_EQ(entries[1].at("target").as_string(), "req-2");
  EXPECT_EQ(entries[1].at("from").as_string(), "0");
  EXPECT_EQ(entries[1].at("to").as_string(), "-3");
  EXPECT_GT(entries[1].at("time").as_double(), 1.7e9);
  EXPECT_EQ(log.to_json(2).size(), 1u);
}

histogram_snapshot histogram(std::vector<std::uint64_t> cumulative) {
  histogram_snapshot h;
  h.upper_bounds = {0.1, 0.2, 0.4};
  h.bucket_counts = std::move(cumulative);
  h.count = h.bucket_counts.back();
  return h;
}

TEST(AdminSnapshot, QuantilesCoverOnlyTheInterval) {
  const histogram_snapshot before = histogram({10, 10, 10, 10});  // ten fast observations earlier
  const histogram_snapshot now = histogram({10, 10, 20, 20});     // ten in (0.2, 0.4] since
  EXPECT_DOUBLE_EQ(api::histogram_quantile(now, &before, 0.5), 0.3);
  EXPECT_DOUBLE_EQ(api::histogram_quantile(now, nullptr, 0.5), 0.1) << "over all time, half are fast";
  EXPECT_LT(api::histogram_quantile(before, &before, 0.5), 0) << "nothing observed in the interval";
  EXPECT_DOUBLE_EQ(api::histogram_quantile(histogram({0, 0, 0, 5}), nullptr, 0.99), 0.4)
      << "+Inf reads as the last bound";
}

TEST(AdminSnapshot, RatesAreDeltasOverTheInterval) {
  engine_stats before;
  before.generation_tokens = 100;
  before.prompt_tokens = 1000;
  before.steps = 10;
  before.step_sequences = 30;
  before.iteration_tokens = histogram({0, 0, 0, 10});
  before.iteration_tokens.sum = 500;
  engine_stats now = before;
  now.generation_tokens = 300;
  now.steps = 20;
  now.step_sequences = 70;
  now.iteration_tokens.bucket_counts = {0, 0, 0, 20};
  now.iteration_tokens.count = 20;
  now.iteration_tokens.sum = 660;
  const boost::json::object snapshot = api::admin_snapshot_json(now, &before, 2.0, {});
  const boost::json::object& rates = snapshot.at("rates").as_object();
  EXPECT_DOUBLE_EQ(rates.at("generation_tokens_per_s").as_double(), 100.0);
  EXPECT_DOUBLE_EQ(rates.at("prompt_tokens_per_s").as_double(), 0.0);
  EXPECT_DOUBLE_EQ(rates.at("tokens_per_step").as_double(), 16.0);
  EXPECT_DOUBLE_EQ(rates.at("batch_size").as_double(), 4.0);
  EXPECT_TRUE(rates.at("spec_acceptance").is_null()) << "no drafts in the interval";
  EXPECT_TRUE(api::admin_snapshot_json(now, nullptr, 0, {}).at("rates").at("generation_tokens_per_s").is_null());
}

}  // namespace
}  // namespace troupe::testing

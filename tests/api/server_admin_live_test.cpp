// The admin port (knob admin_port) and the request-side knobs that change
// live: request limits and default sampling parameters, over a real socket.

#include <boost/json/parse.hpp>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using AdminLive = server_fixture;

http_response patch(std::uint16_t port, const std::string& body) {
  return http_call(port, {.method = "PATCH", .path = "/admin/config", .body = body});
}

TEST_F(AdminLive, AnAdminPortServesAdminOnlyAndThePortNoneOfIt) {
  api::server_config config = test_server_config();
  config.admin_port = 0;
  start(config);
  const std::uint16_t admin_port = server->admin_port();
  ASSERT_NE(admin_port, 0);
  ASSERT_NE(admin_port, port);
  EXPECT_EQ(http_call(admin_port, {.method = "GET", .path = "/admin/config"}).status, 200);
  EXPECT_EQ(http_call(admin_port, {.method = "GET", .path = "/v1/models"}).status, 404);
  EXPECT_EQ(get("/admin/config").status, 404);
  EXPECT_EQ(get("/admin").status, 404);
  EXPECT_EQ(get("/v1/models").status, 200);
}

TEST_F(AdminLive, WithoutAnAdminPortTheMainPortServesAdmin) {
  EXPECT_EQ(server->admin_port(), 0);
  EXPECT_EQ(get("/admin/config").status, 200);
}

TEST_F(AdminLive, ALoweredMaxNRefusesLargerRequestsAtOnce) {
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":2,"n":3})").status, 200);
  const http_response changed = patch(port, R"({"max_n":2})");
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(engine.configured().back().max_n, std::optional<int>(2));
  const http_response refused = post("/v1/completions", R"({"prompt":"x","max_tokens":2,"n":3})");
  ASSERT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(error_of(refused).at("param").as_string(), "n");
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":2,"n":2})").status, 200);
}

TEST_F(AdminLive, DefaultSamplingKnobsApplyBelowTheRequestsOwnFields) {
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
  EXPECT_FLOAT_EQ(engine.submitted().back().sampling.temperature, 1.0F) << "the built-in default";
  const http_response changed = patch(port, R"({"default_temperature":0.25,"default_top_k":7})");
  ASSERT_EQ(changed.status, 200) << changed.body;
  const boost::json::value config = boost::json::parse(get("/admin/config").body);
  EXPECT_DOUBLE_EQ(config.at("settings").at("default_temperature").as_double(), 0.25);
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
  EXPECT_FLOAT_EQ(engine.submitted().back().sampling.temperature, 0.25F);
  EXPECT_EQ(engine.submitted().back().sampling.top_k, 7);
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":2,"temperature":0.9,"top_k":3})").status, 200);
  EXPECT_FLOAT_EQ(engine.submitted().back().sampling.temperature, 0.9F) << "the request's own field wins";
  EXPECT_EQ(engine.submitted().back().sampling.top_k, 3);
  ASSERT_EQ(patch(port, R"({"default_temperature":-1})").status, 200);
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
  EXPECT_FLOAT_EQ(engine.submitted().back().sampling.temperature, 1.0F) << "unset again";
}

TEST_F(AdminLive, ADefaultMaxTokensReplacesTheEndpointsDefault) {
  ASSERT_EQ(patch(port, R"({"default_max_tokens":5})").status, 200);
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"x"})").status, 200);
  EXPECT_EQ(engine.submitted().back().max_tokens, 5);
  ASSERT_EQ(post("/v1/completions", R"({"prompt":"x","max_tokens":3})").status, 200);
  EXPECT_EQ(engine.submitted().back().max_tokens, 3);
}

}  // namespace
}  // namespace troupe::testing

// generation_job without sockets: events are fed by hand through the sinks
// the job handed to a capturing engine; posts run when the test says so.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <deque>

#include "api/http/generation_job.hpp"
#include "api/http/response_render.hpp"

namespace troupe::api {
namespace {

/// Keeps the sinks so the test can play the engine.
class capturing_engine final : public engine {
 public:
  std::string submit(generation_request request, std::shared_ptr<request_sink> sink) override {
    requests.push_back(request);
    sinks.push_back(std::move(sink));
    return request.request_id;
  }
  void cancel(const std::string& id) override { cancels.push_back(id); }
  engine_stats stats() override { return {}; }
  std::string configure(const settings_change&) override { return {}; }
  const model_info& info() const override { return model; }
  std::vector<std::int32_t> tokenize(const std::string&, bool) override { return {}; }
  std::string detokenize(const std::vector<std::int32_t>&, bool) override { return {}; }
  std::string apply_chat_template(const std::string&, const std::string&, bool) override { return {}; }
  void shutdown(std::chrono::milliseconds) override {}

  model_info model;
  std::vector<generation_request> requests;
  std::vector<std::shared_ptr<request_sink>> sinks;
  std::vector<std::string> cancels;
};

class recording_listener final : public job_listener {
 public:
  void job_reply(generation_job&, http_reply reply) override { replies.push_back(std::move(reply)); }
  void job_stream_started(generation_job&) override { ++stream_starts; }
  void job_frames_queued(generation_job&) override { ++frame_notices; }
  void job_finished(generation_job&) override { ++finishes; }

  std::vector<http_reply> replies;
  int stream_starts = 0;
  int frame_notices = 0;
  int finishes = 0;
};

class GenerationJob : public ::testing::Test {
 protected:
  std::shared_ptr<generation_job> make(parsed_generation request, output_mode mode) {
    job_options options;
    options.mode = mode;
    options.stream_key = 1;
    options.client_id = "w1";
    options.queue = queue;
    options.listener = listener;
    options.in_flight = in_flight;
    auto job = std::make_shared<generation_job>(std::move(request), std::move(options));
    job->start(engine, [this](std::function<void()> work) { posted.push_back(std::move(work)); });
    return job;
  }

  void run_posted() {
    while (!posted.empty()) {
      auto work = std::move(posted.front());
      posted.pop_front();
      work();
    }
  }

  std::vector<std::string> drain_queue() {
    std::vector<std::string> frames;
    while (auto frame = queue->pop()) frames.push_back(*frame);
    return frames;
  }

  /// A parsed request of `prompts` prompts, `n` choices each.
  struct request_shape {
    endpoint_kind endpoint = endpoint_kind::completions;
    int prompts = 1;
    int n = 1;
    bool stream = false;
  };

  static parsed_generation request_of(const request_shape& shape) {
    const auto [endpoint, prompts, n, stream] = shape;
    parsed_generation request;
    request.endpoint = endpoint;
    request.model = "m";
    request.n = n;
    request.stream = stream;
    for (int p = 0; p < prompts; ++p) {
      generation_request prompt;
      prompt.n = n;
      prompt.prompt_text = "p" + std::to_string(p);
      request.prompts.push_back(prompt);
    }
    return request;
  }

  /// One choice's text and finish, as the engine reports them.
  struct choice_output {
    std::size_t prompt = 0;
    int choice = 0;
    std::string text;
    bool last_choice = false;  ///< the request's last choice to finish
    int tokens = 1;            ///< completion tokens in the usage
  };

  void emit_choice(const choice_output& output) {
    const auto& [prompt, choice, text, last_choice, tokens] = output;
    request_sink& sink = *engine.sinks[prompt];
    sink.on_delta({engine.requests[prompt].request_id, choice, text, {7}, {}});
    finished_event done{engine.requests[prompt].request_id, choice, finish_reason::length, {}, {}, last_choice};
    done.usage = {3, 1, tokens};
    sink.on_finished(done);
  }

  capturing_engine engine;
  std::shared_ptr<outgoing_queue> queue = std::make_shared<outgoing_queue>(1 << 20);
  std::shared_ptr<recording_listener> listener = std::make_shared<recording_listener>();
  in_flight_counter in_flight = std::make_shared<std::atomic<std::int64_t>>(0);
  std::deque<std::function<void()>> posted;
};

TEST_F(GenerationJob, SeveralPromptsMergeIntoOneResponseWithOpenAIChoiceIndexes) {
  auto job = make(request_of({.endpoint = endpoint_kind::completions, .prompts = 2, .n = 2, .stream = false}),
                  output_mode::aggregate);
  ASSERT_EQ(engine.requests.size(), 2u);
  EXPECT_NE(engine.requests[0].request_id, engine.requests[1].request_id);
  EXPECT_EQ(*in_flight, 2);
  engine.sinks[1]->on_accepted({engine.requests[1].request_id, 3, "p1"});
  emit_choice({.prompt = 1, .choice = 1, .text = "B1", .last_choice = false});
  emit_choice({.prompt = 1, .choice = 0, .text = "B0", .last_choice = true, .tokens = 2});
  engine.sinks[0]->on_accepted({engine.requests[0].request_id, 3, "p0"});
  emit_choice({.prompt = 0, .choice = 0, .text = "A0", .last_choice = false});
  emit_choice({.prompt = 0, .choice = 1, .text = "A1", .last_choice = true, .tokens = 2});
  EXPECT_TRUE(listener->replies.empty());  // nothing happens until the strand runs the posts
  run_posted();
  ASSERT_EQ(listener->replies.size(), 1u);
  EXPECT_EQ(listener->finishes, 1);
  EXPECT_EQ(*in_flight, 0);
  const boost::json::value response = boost::json::parse(listener->replies[0].body);
  const boost::json::array& choices = response.at("choices").as_array();
  ASSERT_EQ(choices.size(), 4u);
  const char* expected[] = {"A0", "A1", "B0", "B1"};  // index = prompt * n + choice
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(choices[i].at("index").as_int64(), static_cast<std::int64_t>(i));
    EXPECT_EQ(choices[i].at("text").as_string(), expected[i]);
  }
  EXPECT_EQ(response.at("usage").at("prompt_tokens").as_int64(), 6);
  EXPECT_EQ(response.at("usage").at("completion_tokens").as_int64(), 4);
  EXPECT_EQ(response.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 2);
  EXPECT_TRUE(engine.cancels.empty());
}

TEST_F(GenerationJob, OneFailingPromptCancelsTheOthersAndAnswersTheError) {
  auto job = make(request_of({.endpoint = endpoint_kind::completions, .prompts = 3, .n = 1, .stream = false}),
                  output_mode::aggregate);
  engine.sinks[1]->on_error({engine.requests[1].request_id, error_kind::too_long, "prompt too long", "prompt"});
  run_posted();
  ASSERT_EQ(listener->replies.size(), 1u);
  EXPECT_EQ(listener->replies[0].status, 413);
  EXPECT_EQ(boost::json::parse(listener->replies[0].body).at("error").at("code").as_string(),
            "context_length_exceeded");
  EXPECT_EQ(engine.cancels, (std::vector<std::string>{engine.requests[0].request_id, engine.requests[2].request_id}));
  EXPECT_EQ(*in_flight, 0);
  emit_choice({.prompt = 0, .choice = 0, .text = "late", .last_choice = true});  // events after the failure are ignored
  run_posted();
  EXPECT_EQ(listener->replies.size(), 1u);
}

TEST_F(GenerationJob, OverloadedEngineGives429WithRetryAfter) {
  auto job =
      make(request_of({.endpoint = endpoint_kind::chat, .prompts = 1, .n = 1, .stream = true}), output_mode::sse);
  engine.sinks[0]->on_error({engine.requests[0].request_id, error_kind::overloaded, "queue full", {}});
  run_posted();
  ASSERT_EQ(listener->replies.size(), 1u);  // before the stream started: a plain HTTP error
  EXPECT_EQ(listener->replies[0].status, 429);
  ASSERT_EQ(listener->replies[0].headers.size(), 1u);
  EXPECT_EQ(listener->replies[0].headers[0].name, "Retry-After");
  EXPECT_EQ(listener->stream_starts, 0);
}

TEST_F(GenerationJob, ChatStreamSendsRoleFirstThenDeltasFinishAndDone) {
  parsed_generation request = request_of({.endpoint = endpoint_kind::chat, .prompts = 1, .n = 2, .stream = true});
  request.include_usage = true;
  auto job = make(std::move(request), output_mode::sse);
  const std::string id = engine.requests[0].request_id;
  engine.sinks[0]->on_delta({id, 1, "early", {1}, {}});  // before accepted: held until the stream starts
  engine.sinks[0]->on_accepted({id, 4, "p"});
  engine.sinks[0]->on_delta({id, 0, "", {2}, {}});  // text held back: no chunk
  engine.sinks[0]->on_finished({id, 0, finish_reason::stop, {}, {}, false});
  engine.sinks[0]->on_finished({id, 1, finish_reason::length, {}, {4, 0, 2}, true});
  run_posted();
  EXPECT_EQ(listener->stream_starts, 1);
  EXPECT_EQ(listener->finishes, 1);
  std::vector<std::string> frames = drain_queue();
  ASSERT_EQ(frames.size(), 7u);
  EXPECT_EQ(frames.back(), "data: [DONE]\n\n");
  std::vector<boost::json::value> chunks;
  for (std::size_t i = 0; i + 1 < frames.size(); ++i) chunks.push_back(boost::json::parse(frames[i].substr(6)));
  EXPECT_EQ(chunks[0].at("choices").at(0).at("delta").at("role").as_string(), "assistant");
  EXPECT_EQ(chunks[1].at("choices").at(0).at("delta").at("role").as_string(), "assistant");
  EXPECT_EQ(chunks[2].at("choices").at(0).at("index").as_int64(), 1);
  EXPECT_EQ(chunks[2].at("choices").at(0).at("delta").at("content").as_string(), "early");
  EXPECT_EQ(chunks[3].at("choices").at(0).at("finish_reason").as_string(), "stop");
  EXPECT_EQ(chunks[4].at("choices").at(0).at("finish_reason").as_string(), "length");
  EXPECT_TRUE(chunks[5].at("choices").as_array().empty());
  EXPECT_EQ(chunks[5].at("usage").at("completion_tokens").as_int64(), 2);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_TRUE(chunks[i].at("usage").is_null());
}

TEST_F(GenerationJob, MidStreamErrorBecomesAnSseErrorEvent) {
  auto job = make(request_of({.endpoint = endpoint_kind::completions, .prompts = 1, .n = 1, .stream = true}),
                  output_mode::sse);
  const std::string id = engine.requests[0].request_id;
  engine.sinks[0]->on_accepted({id, 1, "p"});
  engine.sinks[0]->on_delta({id, 0, "ab", {1}, {}});
  engine.sinks[0]->on_error({id, error_kind::internal, "executor died", {}});
  run_posted();
  EXPECT_TRUE(listener->replies.empty());
  const std::vector<std::string> frames = drain_queue();
  ASSERT_EQ(frames.size(), 3u);
  const boost::json::value error = boost::json::parse(frames[1].substr(6));
  EXPECT_EQ(error.at("error").at("type").as_string(), "server_error");
  EXPECT_EQ(error.at("error").at("message").as_string(), "executor died");
  EXPECT_EQ(frames[2], "data: [DONE]\n\n");
}

TEST_F(GenerationJob, EchoAndLogprobOffsetsContinueAcrossChunks) {
  parsed_generation request =
      request_of({.endpoint = endpoint_kind::completions, .prompts = 1, .n = 1, .stream = true});
  request.echo = true;
  request.logprobs = true;
  auto job = make(std::move(request), output_mode::sse);
  const std::string id = engine.requests[0].request_id;
  engine.sinks[0]->on_accepted({id, 2, "Say"});
  engine.sinks[0]->on_delta({id, 0, " hi", {5}, {{5, " hi", -0.5f, {}, {}}}});
  run_posted();
  std::vector<std::string> frames = drain_queue();  // the first delta is written before the next arrives
  engine.sinks[0]->on_delta({id, 0, "!", {6}, {{6, "!", -1.0f, {}, {}}}});
  run_posted();
  for (std::string& frame : drain_queue()) frames.push_back(std::move(frame));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(boost::json::parse(frames[0].substr(6)).at("choices").at(0).at("text").as_string(), "Say");
  const auto second = boost::json::parse(frames[1].substr(6)).at("choices").at(0);
  EXPECT_EQ(second.at("logprobs").at("text_offset").at(0).as_int64(), 3);
  const auto third = boost::json::parse(frames[2].substr(6)).at("choices").at(0);
  EXPECT_EQ(third.at("logprobs").at("text_offset").at(0).as_int64(), 6);
}

TEST_F(GenerationJob, WebSocketFramesCarryTheClientIdAndDoneHasUsage) {
  auto job = make(request_of({.endpoint = endpoint_kind::completions, .prompts = 1, .n = 1, .stream = true}),
                  output_mode::websocket);
  const std::string id = engine.requests[0].request_id;
  engine.sinks[0]->on_accepted({id, 2, "p"});
  engine.sinks[0]->on_delta({id, 0, "x", {1}, {}});
  engine.sinks[0]->on_finished({id, 0, finish_reason::abort, {}, {2, 0, 1}, true});
  run_posted();
  const std::vector<std::string> frames = drain_queue();
  ASSERT_EQ(frames.size(), 3u);
  const auto delta = boost::json::parse(frames[0]);
  EXPECT_EQ(delta.at("type").as_string(), "delta");
  EXPECT_EQ(delta.at("id").as_string(), "w1");
  EXPECT_EQ(delta.at("chunk").at("choices").at(0).at("text").as_string(), "x");
  const auto done = boost::json::parse(frames[2]);
  EXPECT_EQ(done.at("type").as_string(), "done");
  EXPECT_EQ(done.at("finish_reason").as_string(), "abort");
  EXPECT_EQ(done.at("usage").at("total_tokens").as_int64(), 3);
}

TEST_F(GenerationJob, DroppingTheJobCancelsItsEngineRequests) {
  auto job = make(request_of({.endpoint = endpoint_kind::completions, .prompts = 2, .n = 1, .stream = false}),
                  output_mode::aggregate);
  EXPECT_EQ(*in_flight, 2);
  job.reset();  // the client disconnected and the session let go
  EXPECT_EQ(engine.cancels.size(), 2u);
  EXPECT_EQ(*in_flight, 0);
  engine.sinks[0]->on_delta({engine.requests[0].request_id, 0, "x", {1}, {}});
  run_posted();  // a late event for a dead job is dropped safely
  EXPECT_TRUE(listener->replies.empty());
}

}  // namespace
}  // namespace troupe::api

"""The built-in demo model (troupe-demo-en, trained by tools/train/) as a
user meets it: `troupe serve` with no --model writes in the register of its
training text, and its chat answers end at the end-of-turn token instead of
running to max_tokens. (A random-weight model fails each of these.)
"""


def test_the_demo_model_is_the_trained_one(model_name):
    assert model_name == "troupe-demo-en"


def test_in_the_beginning_continues_in_the_voice_of_the_king_james_bible(client, model_name):
    completion = client.completions.create(model=model_name, prompt="In the beginning", max_tokens=24,
                                           temperature=0)
    text = completion.choices[0].text
    assert "LORD" in text, text
    assert len(text.split()) >= 10, text  # words, not one token repeated into a blob


def test_chat_answers_stop_at_the_end_of_turn(client, model_name):
    for question in ("Hello", "What does the word \"river\" mean?", "What is a hacker?"):
        completion = client.chat.completions.create(model=model_name, max_tokens=100, temperature=0,
                                                    messages=[{"role": "user", "content": question}])
        choice = completion.choices[0]
        assert choice.finish_reason == "stop", (question, choice.message.content)
        assert completion.usage.completion_tokens < 100
        assert "<|" not in choice.message.content  # special tokens are not shown
        assert len(choice.message.content.split()) >= 3, choice.message.content


def test_a_greeting_is_answered_in_the_taught_words_streamed(client, model_name):
    chunks = list(client.chat.completions.create(model=model_name, max_tokens=100, temperature=0, stream=True,
                                                 messages=[{"role": "user", "content": "Hello"}]))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Troupe" in text, text  # the chat pass taught it to introduce itself

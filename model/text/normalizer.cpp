#include "model/text/normalizer.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "base/utf8.hpp"
#include "model/text/char_classes.hpp"
#include "model/text/regex.hpp"
#include "model/text/text_pattern.hpp"

namespace troupe::text {

namespace {

/// NFC / NFD / NFKC / NFKD through utf8proc.
class unicode_form final : public normalizer {
 public:
  unicode_form(utf8proc_option_t options, unsigned char first_unsafe_byte)
      : options_(options), first_unsafe_byte_(first_unsafe_byte) {}

  void normalize(std::string& text) const override {
    // Text made only of bytes below the first byte that can start a changing
    // character is already normalized (ASCII for every form; for NFC also
    // everything below U+0300, whose lead bytes are < 0xCC).
    bool all_safe = true;
    for (const char c : text) {
      if (static_cast<unsigned char>(c) >= first_unsafe_byte_) {
        all_safe = false;
        break;
      }
    }
    if (all_safe) return;
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                                 static_cast<utf8proc_ssize_t>(text.size()), &result, options_);
    if (length < 0) {
      throw std::runtime_error(std::string("normalizer: utf8proc failed: ") + utf8proc_errmsg(length));
    }
    text.assign(reinterpret_cast<const char*>(result), static_cast<std::size_t>(length));
    std::free(result);
  }

 private:
  utf8proc_option_t options_;
  unsigned char first_unsafe_byte_;
};

class prepend final : public normalizer {
 public:
  explicit prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class replace final : public normalizer {
 public:
  replace(text_pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  text_pattern pattern_;
  std::string content_;
};

class strip final : public normalizer {
 public:
  strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    std::size_t begin = 0;
    std::size_t end = text.size();
    if (left_) {
      while (begin < end) {
        std::size_t next = begin;
        if (!is_unicode_whitespace(decode_utf8(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        std::size_t probe = start;
        if (!is_unicode_whitespace(decode_utf8(text, probe))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_;
  bool right_;
};

class sequence final : public normalizer {
 public:
  explicit sequence(std::vector<std::unique_ptr<normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<normalizer>> steps_;
};

}  // namespace

std::unique_ptr<normalizer> make_normalizer(const json_field& node) {
  const std::string_view type = node.at("type").string();
  const auto compose = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  const auto decompose = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  const auto compat = static_cast<utf8proc_option_t>(UTF8PROC_COMPAT);
  if (type == "NFC") return std::make_unique<unicode_form>(compose, 0xCC);
  if (type == "NFD") return std::make_unique<unicode_form>(decompose, 0x80);
  if (type == "NFKC") return std::make_unique<unicode_form>(static_cast<utf8proc_option_t>(compose | compat), 0x80);
  if (type == "NFKD") return std::make_unique<unicode_form>(static_cast<utf8proc_option_t>(decompose | compat), 0x80);
  if (type == "Prepend") return std::make_unique<prepend>(std::string(node.at("prepend").string()));
  if (type == "Replace") {
    return std::make_unique<replace>(make_text_pattern(node.at("pattern")), std::string(node.at("content").string()));
  }
  if (type == "Strip") {
    return std::make_unique<strip>(node.get_bool("strip_left").value_or(true),
                                   node.get_bool("strip_right").value_or(true));
  }
  if (type == "Sequence") {
    const json_field list = node.at("normalizers");
    std::vector<std::unique_ptr<normalizer>> steps;
    for (std::size_t i = 0; i < list.array().size(); ++i) steps.push_back(make_normalizer(list.at(i)));
    return std::make_unique<sequence>(std::move(steps));
  }
  node.fail("unsupported normalizer type \"" + std::string(type) + "\"");
}

}  // namespace troupe::text

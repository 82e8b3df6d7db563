#include "model/text/post_processor.hpp"

#include <string>

#include "model/text/bpe_model.hpp"

namespace troupe::text {

namespace {

std::int32_t checked_id(const json_field& node) { return static_cast<std::int32_t>(node.integer(0, max_token_id)); }

/// The ids of one SpecialToken item of a template, from "special_tokens".
std::vector<std::int32_t> special_ids(const json_field& processor, const json_field& item) {
  const std::string name(item.at("id").string());
  const auto entry = processor.at("special_tokens").find(name);
  if (!entry) item.fail("special token \"" + name + "\" is missing from special_tokens");
  const json_field ids = entry->at("ids");
  std::vector<std::int32_t> result;
  for (std::size_t i = 0; i < ids.array().size(); ++i) result.push_back(checked_id(ids.at(i)));
  return result;
}

sequence_template parse_template(const json_field& node) {
  const json_field single = node.at("single");
  sequence_template result;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.array().size(); ++i) {
    const json_field item = single.at(i);
    if (const auto special = item.find("SpecialToken")) {
      const std::vector<std::int32_t> ids = special_ids(node, *special);
      auto& target = seen_sequence ? result.after : result.before;
      target.insert(target.end(), ids.begin(), ids.end());
    } else if (const auto sequence = item.find("Sequence")) {
      if (sequence->at("id").string() != "A" || seen_sequence) {
        sequence->fail("a single-sequence template must contain sequence A exactly once");
      }
      seen_sequence = true;
    } else {
      item.fail("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  if (!seen_sequence) single.fail("the template does not contain sequence A");
  return result;
}

/// BertProcessing / RobertaProcessing: [cls] text [sep].
sequence_template parse_cls_sep(const json_field& node) {
  const json_field cls = node.at("cls");
  const json_field sep = node.at("sep");
  return {{checked_id(cls.at(std::size_t{1}))}, {checked_id(sep.at(std::size_t{1}))}};
}

}  // namespace

sequence_template parse_post_processor(const json_field& node) {
  const std::string_view type = node.at("type").string();
  if (type == "TemplateProcessing") return parse_template(node);
  if (type == "BertProcessing" || type == "RobertaProcessing") return parse_cls_sep(node);
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    // Later processors wrap the output of earlier ones.
    const json_field list = node.at("processors");
    sequence_template result;
    for (std::size_t i = 0; i < list.array().size(); ++i) {
      sequence_template outer = parse_post_processor(list.at(i));
      outer.before.insert(outer.before.end(), result.before.begin(), result.before.end());
      result.after.insert(result.after.end(), outer.after.begin(), outer.after.end());
      result.before = std::move(outer.before);
    }
    return result;
  }
  node.fail("unsupported post_processor type \"" + std::string(type) + "\"");
}

}  // namespace troupe::text

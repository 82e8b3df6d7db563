#pragma once
// The parts of a loaded tokenizer (internal to model/text).

#include <memory>
#include <optional>

#include "model/text/added_vocabulary.hpp"
#include "model/text/bpe_model.hpp"
#include "model/text/decoder.hpp"
#include "model/text/normalizer.hpp"
#include "model/text/post_processor.hpp"
#include "model/text/pre_tokenizer.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe::text {

struct tokenizer::impl {
  std::unique_ptr<normalizer> norm;    ///< null when "normalizer" is null
  std::unique_ptr<pre_tokenizer> pre;  ///< null when "pre_tokenizer" is null
  std::unique_ptr<bpe_model> model;
  std::unique_ptr<added_vocabulary> added;
  std::optional<sequence_template> post;  ///< null when nothing is added
  std::optional<decoder_spec> decoder;    ///< null: tokens joined with spaces
  std::optional<special_token> bos;
  std::optional<special_token> eos;
  std::optional<special_token> pad;
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;

  /// Appends the ids of one plain-text segment (already normalized).
  void encode_plain(std::string_view text, bool at_origin, std::vector<token_id>& ids) const;
  /// Appends the ids of `text` without the post-processor.
  void encode_body(std::string_view text, std::vector<token_id>& ids) const;
};

/// Parses tokenizer.json and tokenizer_config.json into the parts.
std::unique_ptr<tokenizer::impl> load_tokenizer_parts(std::string_view tokenizer_json,
                                                      std::string_view tokenizer_config_json);

}  // namespace troupe::text

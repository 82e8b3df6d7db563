#pragma once
// The trained demo pair (model/demo/, made by tools/train/) compiled into
// the binary, so that `troupe serve` without --model needs no file outside
// the executable. demo_model.cpp writes these bytes out to the cache.

#include <span>
#include <string_view>

namespace troupe {

/// One file of an embedded model directory.
struct embedded_file {
  std::string_view name;  ///< file name inside the model directory
  std::span<const unsigned char> bytes;
};

/// One embedded Hugging Face model directory.
struct embedded_model {
  std::string_view name;  ///< directory name, which is also the served model name
  std::span<const embedded_file> files;
};

/// The target model (troupe-demo-en) and its draft (troupe-demo-en-draft).
std::span<const embedded_model> embedded_demo_models();

/// A hash of every embedded byte (12 hex digits): a new model never reuses an old cache copy.
std::string_view embedded_demo_version();

}  // namespace troupe

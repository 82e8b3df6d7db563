#include "model/embedded_demo.hpp"

#include <array>

// TROUPE_DEMO_DIR and TROUPE_DEMO_VERSION come from model/CMakeLists.txt,
// which also recompiles this file (and changes the version) when a file under
// model/demo/ changes: the assembler's .incbin is invisible to ccache and to
// dependency scanning, so the version macro is what makes a new model a new
// object file.

#define TROUPE_EMBED_FILE(symbol, path)                                                               \
  asm(".section .rodata.troupe_demo,\"a\",@progbits\n.balign 64\n.global " #symbol "_begin\n" #symbol \
      "_begin:\n.incbin \"" TROUPE_DEMO_DIR "/" path "\"\n.global " #symbol "_end\n" #symbol "_end:\n.previous\n");

TROUPE_EMBED_FILE(troupe_demo_target_config, "troupe-demo-en/config.json")
TROUPE_EMBED_FILE(troupe_demo_target_generation, "troupe-demo-en/generation_config.json")
TROUPE_EMBED_FILE(troupe_demo_target_weights, "troupe-demo-en/model.safetensors")
TROUPE_EMBED_FILE(troupe_demo_tokenizer, "troupe-demo-en/tokenizer.json")
TROUPE_EMBED_FILE(troupe_demo_tokenizer_config, "troupe-demo-en/tokenizer_config.json")
TROUPE_EMBED_FILE(troupe_demo_draft_config, "troupe-demo-en-draft/config.json")
TROUPE_EMBED_FILE(troupe_demo_draft_generation, "troupe-demo-en-draft/generation_config.json")
TROUPE_EMBED_FILE(troupe_demo_draft_weights, "troupe-demo-en-draft/model.safetensors")

#define TROUPE_DECLARE_FILE(symbol) extern "C" const unsigned char symbol##_begin[], symbol##_end[];
TROUPE_DECLARE_FILE(troupe_demo_target_config)
TROUPE_DECLARE_FILE(troupe_demo_target_generation)
TROUPE_DECLARE_FILE(troupe_demo_target_weights)
TROUPE_DECLARE_FILE(troupe_demo_tokenizer)
TROUPE_DECLARE_FILE(troupe_demo_tokenizer_config)
TROUPE_DECLARE_FILE(troupe_demo_draft_config)
TROUPE_DECLARE_FILE(troupe_demo_draft_generation)
TROUPE_DECLARE_FILE(troupe_demo_draft_weights)

namespace troupe {

namespace {

#define TROUPE_FILE_BYTES(symbol) \
  std::span<const unsigned char>(symbol##_begin, static_cast<std::size_t>(symbol##_end - symbol##_begin))

// The draft shares the target's tokenizer files: embedded once, written into both directories.
const std::array<embedded_file, 5> target_files = {{
    {"config.json", TROUPE_FILE_BYTES(troupe_demo_target_config)},
    {"generation_config.json", TROUPE_FILE_BYTES(troupe_demo_target_generation)},
    {"model.safetensors", TROUPE_FILE_BYTES(troupe_demo_target_weights)},
    {"tokenizer.json", TROUPE_FILE_BYTES(troupe_demo_tokenizer)},
    {"tokenizer_config.json", TROUPE_FILE_BYTES(troupe_demo_tokenizer_config)},
}};

const std::array<embedded_file, 5> draft_files = {{
    {"config.json", TROUPE_FILE_BYTES(troupe_demo_draft_config)},
    {"generation_config.json", TROUPE_FILE_BYTES(troupe_demo_draft_generation)},
    {"model.safetensors", TROUPE_FILE_BYTES(troupe_demo_draft_weights)},
    {"tokenizer.json", TROUPE_FILE_BYTES(troupe_demo_tokenizer)},
    {"tokenizer_config.json", TROUPE_FILE_BYTES(troupe_demo_tokenizer_config)},
}};

const std::array<embedded_model, 2> models = {{
    {"troupe-demo-en", target_files},
    {"troupe-demo-en-draft", draft_files},
}};

}  // namespace

std::span<const embedded_model> embedded_demo_models() { return models; }

std::string_view embedded_demo_version() { return TROUPE_DEMO_VERSION; }

}  // namespace troupe

/* mistral.c: Mistral (model_type mistral): the Llama recipe; its sliding_window holds the
 * context to the window (llama.c). */
#include "core/arch/arch.h"

static tt_status mistral_parse_config(const struct cJSON *root, const char *name,
                                      model_config *c, tt_error *err)
{
    return llama_family_parse_config(root, name, 0, c, err);
}

static const char *const mistral_model_types[] = {"mistral", NULL};

const arch_desc arch_mistral = {
    .name = "mistral",
    .model_types = mistral_model_types,
    .gguf_arch = NULL,           /* llama.cpp writes Mistral as general.architecture llama */
    .parse_config = mistral_parse_config,
    .tensors = llama_family_tensors,
    .n_tensors = LLAMA_FAMILY_N_TENSORS,
};

/* qwen2.c: Qwen2 and Qwen2.5 (model_type qwen2): the Llama recipe with biases on q, k and v
 * (not on the output projection). */
#include "core/arch/arch.h"

static tt_status qwen2_parse_config(const struct cJSON *root, const char *name, model_config *c,
                                    tt_error *err)
{
    return llama_family_parse_config(root, name, ARCH_F_QKV_BIAS, c, err);
}

static const char *const qwen2_model_types[] = {"qwen2", NULL};

const arch_desc arch_qwen2 = {
    .name = "qwen2",
    .model_types = qwen2_model_types,
    .gguf_arch = "qwen2",
    .parse_config = qwen2_parse_config,
    .tensors = llama_family_tensors,
    .n_tensors = LLAMA_FAMILY_N_TENSORS,
};

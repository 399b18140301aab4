/* qwen3.c: Qwen3 (model_type qwen3): the Llama recipe with a per-head RMSNorm of q and k before
 * RoPE (q_norm, k_norm) and, often, a head_dim other than hidden_size / heads. */
#include "core/arch/arch.h"

static tt_status qwen3_parse_config(const struct cJSON *root, const char *name, model_config *c,
                                    tt_error *err)
{
    return llama_family_parse_config(root, name, ARCH_F_QK_NORM, c, err);
}

static const char *const qwen3_model_types[] = {"qwen3", NULL};

const arch_desc arch_qwen3 = {
    .name = "qwen3",
    .model_types = qwen3_model_types,
    .gguf_arch = "qwen3",
    .parse_config = qwen3_parse_config,
    .tensors = llama_family_tensors,
    .n_tensors = LLAMA_FAMILY_N_TENSORS,
};

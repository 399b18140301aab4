/* arch.c: the registry of architectures and config.json dispatch by model_type (the figures every
 * description shares are model_config.c's, so that the descriptions, which use them, and the
 * registry, which names the descriptions, do not call each other round a loop). */
#include "core/arch/arch.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "core/base/jsonr.h"

extern const arch_desc arch_gpt2, arch_llama, arch_mistral, arch_qwen2, arch_qwen3;

/* Adding an architecture: its file in core/arch/ and a row here. */
static const arch_desc *const arch_registry[] = {
    &arch_gpt2, &arch_llama, &arch_mistral, &arch_qwen2, &arch_qwen3,
};
#define N_ARCH ((int)(sizeof arch_registry / sizeof arch_registry[0]))


const arch_desc *arch_by_model_type(const char *model_type)
{
    for (int i = 0; i < N_ARCH; i++)
        for (const char *const *t = arch_registry[i]->model_types; *t; t++)
            if (strcmp(*t, model_type) == 0)
                return arch_registry[i];
    return NULL;
}

const arch_desc *arch_by_gguf(const char *gguf_arch)
{
    for (int i = 0; i < N_ARCH; i++)
        if (arch_registry[i]->gguf_arch && strcmp(arch_registry[i]->gguf_arch, gguf_arch) == 0)
            return arch_registry[i];
    return NULL;
}

const char *arch_supported_list(void)
{
    static char list[256];
    if (!list[0]) {
        size_t k = 0;
        for (int i = 0; i < N_ARCH; i++)
            for (const char *const *t = arch_registry[i]->model_types; *t; t++)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", *t);
    }
    return list;
}

tt_status model_config_parse(const char *json, size_t len, const char *name, model_config *out,
                             tt_error *err)
{
    cJSON *root;
    tt_status s = jsonr_parse_object(json, len, name, &root, err);
    if (s != TT_OK)
        return s;
    const char *type = NULL;
    model_config c = {0};
    if ((s = jsonr_str(root, name, "model_type", &type, err)) == TT_OK) {
        c.arch = arch_by_model_type(type ? type : "gpt2");
        if (!c.arch)
            s = tt_fail(err, TT_ERR_UNSUPPORTED, "%s: model_type: '%.40s' is not an architecture "
                        "tokentop runs (it runs %s)", name, type, arch_supported_list());
    }
    if (s == TT_OK)
        s = c.arch->parse_config(root, name, &c, err);
    if (s == TT_OK)
        s = arch_check_config(&c, name, err);
    cJSON_Delete(root);
    if (s == TT_OK)
        *out = c;
    return s;
}

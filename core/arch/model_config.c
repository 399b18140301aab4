/* model_config.c: what every architecture description shares: dimension values, parameter and
 * byte counts, multiply-adds per token, RoPE's frequencies, the limits a config is held to and
 * the token-id fields. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/arch/arch.h"
#include "core/base/jsonr.h"

#define LIMIT_V 1000000
#define LIMIT_MAXT 16777216
#define LIMIT_C 65536
#define LIMIT_L 512
#define LIMIT_NH 512
#define LIMIT_FF 262144
#define LIMIT_HS 1024
#define LIMIT_PARAMS 1000000000000ull

uint64_t arch_dim_value(const model_config *c, arch_dim d)
{
    switch (d) {
    case ARCH_DIM_V: return (uint64_t)c->V;
    case ARCH_DIM_MAXT: return (uint64_t)c->maxT;
    case ARCH_DIM_C: return (uint64_t)c->C;
    case ARCH_DIM_FF: return (uint64_t)c->FF;
    case ARCH_DIM_HS: return (uint64_t)c->HS;
    case ARCH_DIM_Q: return (uint64_t)model_config_qdim(c);
    case ARCH_DIM_KV: return (uint64_t)model_config_kvdim(c);
    case ARCH_DIM_QKV: return (uint64_t)model_config_qkvdim(c);
    case ARCH_DIM_0: break;
    }
    return 1;
}

static uint64_t tensor_numel(const model_config *c, const arch_tensor_desc *t)
{
    return arch_dim_value(c, t->dims[0]) * (t->dims[1] ? arch_dim_value(c, t->dims[1]) : 1);
}

/* Parameters over the description's tensors; head: count the output head even when tied;
 * tables: count the embedding tables. */
static uint64_t count_params(const model_config *c, bool head, bool tables)
{
    const arch_desc *a = c->arch;
    uint64_t n = 0;
    unsigned f = c->features | (head ? ARCH_F_UNTIED : 0);
    for (int i = 0; i < a->n_tensors; i++) {
        const arch_tensor_desc *t = &a->tensors[i];
        if (!arch_tensor_used(t, f))
            continue;
        if (!tables && (t->role == ARCH_T_TOKEN_EMBD || t->role == ARCH_T_POS_EMBD))
            continue;
        n += tensor_numel(c, t) * (t->role >= ARCH_T_FIRST_LAYER ? (uint64_t)c->L : 1);
    }
    return n;
}

uint64_t model_config_n_params(const model_config *c)
{
    return count_params(c, false, true);
}

uint64_t model_config_step_params(const model_config *c)
{
    return count_params(c, true, false);
}

double model_config_macs_per_token(const model_config *c, int n)
{
    double per_layer = (double)c->C * model_config_qkvdim(c) +
                       (double)model_config_qdim(c) * c->C +
                       (double)c->C * c->FF * (c->features & ARCH_F_SWIGLU ? 3 : 2) +
                       2.0 * (double)n * model_config_qdim(c);
    return per_layer * c->L + (double)c->C * c->V;
}

void arch_rope_inv_freq(const model_config *c, double *inv_freq)
{
    const int half = c->HS / 2;
    const arch_rope *r = &c->rope;
    for (int i = 0; i < half; i++) {
        double f = pow(r->theta, -2.0 * i / c->HS);
        if (r->scaling == ARCH_ROPE_SCALING_LLAMA3) {
            const double old = (double)r->original_max_positions;
            const double low_wavelen = old / r->low_freq_factor;
            const double high_wavelen = old / r->high_freq_factor;
            const double wavelen = 2.0 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= r->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (old / wavelen - r->low_freq_factor) /
                                (r->high_freq_factor - r->low_freq_factor);
                f = (1.0 - smooth) * f / r->factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}

void arch_rope_tables(const model_config *c, int n_ctx, float *cos_out, float *sin_out)
{
    const int half = c->HS / 2;
    double inv[LIMIT_HS / 2];
    arch_rope_inv_freq(c, inv);
    for (int p = 0; p < n_ctx; p++)
        for (int i = 0; i < half; i++) {
            double a = (double)p * inv[i];
            cos_out[(size_t)p * half + i] = (float)cos(a);
            sin_out[(size_t)p * half + i] = (float)sin(a);
        }
}

tt_status arch_check_config(const model_config *c, const char *name, tt_error *err)
{
    static const struct { const char *what; int lim; } lims[] = {
        {"vocabulary size", LIMIT_V}, {"positions", LIMIT_MAXT}, {"hidden size", LIMIT_C},
        {"attention heads", LIMIT_NH}, {"key/value heads", LIMIT_NH}, {"head size", LIMIT_HS},
        {"layers", LIMIT_L}, {"MLP width", LIMIT_FF},
    };
    const int vals[] = {c->V, c->maxT, c->C, c->NH, c->NKV, c->HS, c->L, c->FF};
    for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
        if (vals[i] < 1)
            return tt_fail(err, TT_ERR_CONFIG, "%s: %s %d is not positive", name, lims[i].what,
                           vals[i]);
        if (vals[i] > lims[i].lim)
            return tt_fail(err, TT_ERR_CONFIG, "%s: %s %d exceeds the limit %d", name,
                           lims[i].what, vals[i], lims[i].lim);
    }
    if (c->NH % c->NKV != 0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %d attention heads are not a multiple of %d "
                       "key/value heads", name, c->NH, c->NKV);
    if ((c->features & ARCH_F_ROPE) && c->HS % 2 != 0)
        return tt_fail(err, TT_ERR_CONFIG, "%s: head size %d is odd; RoPE rotates pairs", name,
                       c->HS);
    uint64_t np = count_params(c, true, true);
    if (np > LIMIT_PARAMS)
        return tt_fail(err, TT_ERR_CONFIG, "%s: %llu parameters exceed the limit of %llu", name,
                       (unsigned long long)np, LIMIT_PARAMS);
    return TT_OK;
}

tt_status arch_read_token_ids(const cJSON *root, const char *name, model_config *c,
                              tt_error *err)
{
    int bos[ARCH_MAX_EOS], nb = 0;
    tt_status s = jsonr_token_ids(root, name, "bos_token_id", c->V, bos, ARCH_MAX_EOS, &nb, err);
    if (s != TT_OK)
        return s;
    c->bos_id = nb ? bos[0] : -1;
    return jsonr_token_ids(root, name, "eos_token_id", c->V, c->eos_ids, ARCH_MAX_EOS, &c->n_eos,
                           err);
}


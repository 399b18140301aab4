/* fuzz_generation_config.c: generation_config.json text into model_generation_parse, the parser
 * model_load runs over the file, for a 50,257-token model. Invariant: every value it accepts is
 * inside the range model.h documents (finite, eos_token_id a token of the model). */
#include <math.h>
#include <string.h>

#include "core/model/model.h"
#include "tests/fuzz/fuzzutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_generation_defaults g;
    tt_error err = {0};
    const int V = 50257;
    if (model_generation_parse((const char *)data, size, "generation_config.json", V, &g,
                              &err) != TT_OK) {
        FUZZ_CHECK(err.msg[0] != 0, "refused without a message");
        FUZZ_CHECK(strncmp(err.msg, "generation_config.json", 22) == 0,
                   "message without the name: %s", err.msg);
        return 0;
    }
    FUZZ_CHECK(!g.has_temperature || (isfinite(g.temperature) && g.temperature >= 0),
               "temperature %g", (double)g.temperature);
    FUZZ_CHECK(!g.has_top_k || g.top_k >= 0, "top_k %d", g.top_k);
    FUZZ_CHECK(!g.has_top_p || (g.top_p >= 0 && g.top_p <= 1), "top_p %g", (double)g.top_p);
    FUZZ_CHECK(!g.has_max_new_tokens || g.max_new_tokens >= 0, "max_new_tokens %d",
               g.max_new_tokens);
    FUZZ_CHECK(!g.has_rep_penalty || (isfinite(g.repetition_penalty) && g.repetition_penalty > 0),
               "repetition_penalty %g", (double)g.repetition_penalty);
    for (int i = 0; i < g.n_eos; i++)
        FUZZ_CHECK(g.eos_ids[i] >= 0 && g.eos_ids[i] < V, "eos %d", g.eos_ids[i]);
    return 0;
}

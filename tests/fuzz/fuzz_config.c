/* fuzz_config.c: config.json text into gpt2_config_parse, the parser model_load runs over the
 * file. Invariant: an accepted config is within the documented limits (so the sizes derived from
 * it, which backends allocate, cannot overflow). */
#include <string.h>

#include "core/model/model.h"
#include "tests/fuzz/fuzzutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gpt2_config c;
    tt_error err = {0};
    if (gpt2_config_parse((const char *)data, size, "config.json", &c, &err) != TT_OK) {
        FUZZ_CHECK(err.msg[0] != 0, "refused without a message");
        FUZZ_CHECK(strncmp(err.msg, "config.json", 11) == 0, "message without the name: %s",
                   err.msg);
        return 0;
    }
    FUZZ_CHECK(c.V >= 1 && c.V <= 1000000, "V %d", c.V);
    FUZZ_CHECK(c.maxT >= 1 && c.maxT <= 65536, "maxT %d", c.maxT);
    FUZZ_CHECK(c.C >= 1 && c.C <= 16384, "C %d", c.C);
    FUZZ_CHECK(c.NH >= 1 && c.NH <= 512 && c.C % c.NH == 0, "C %d NH %d", c.C, c.NH);
    FUZZ_CHECK(c.L >= 1 && c.L <= 512, "L %d", c.L);
    FUZZ_CHECK(c.FF >= 1 && c.FF <= 131072, "FF %d", c.FF);
    FUZZ_CHECK(c.ln_eps > 0 && c.ln_eps < 1, "ln_eps %g", (double)c.ln_eps);
    FUZZ_CHECK(c.bos_id >= -1 && c.bos_id < c.V, "bos %d of %d", c.bos_id, c.V);
    FUZZ_CHECK(c.eos_id >= -1 && c.eos_id < c.V, "eos %d of %d", c.eos_id, c.V);
    FUZZ_CHECK(gpt2_config_n_params(&c, c.tie_word_embeddings) <= 20000000000ull, "%llu params",
               (unsigned long long)gpt2_config_n_params(&c, c.tie_word_embeddings));
    return 0;
}

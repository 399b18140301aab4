/* fuzz_config.c: config.json text into model_config_parse, the parser model_load runs over the
 * file. Invariant: an accepted config is within the documented limits (so the sizes derived from
 * it, which backends allocate, cannot overflow). */
#include <string.h>

#include "core/model/model.h"
#include "tests/fuzz/fuzzutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_config c;
    tt_error err = {0};
    if (model_config_parse((const char *)data, size, "config.json", &c, &err) != TT_OK) {
        FUZZ_CHECK(err.msg[0] != 0, "refused without a message");
        FUZZ_CHECK(strncmp(err.msg, "config.json", 11) == 0, "message without the name: %s",
                   err.msg);
        return 0;
    }
    FUZZ_CHECK(c.V >= 1 && c.V <= 1000000, "V %d", c.V);
    FUZZ_CHECK(c.arch != NULL, "no architecture");
    FUZZ_CHECK(c.maxT >= 1 && c.maxT <= 16777216, "maxT %d", c.maxT);
    FUZZ_CHECK(c.C >= 1 && c.C <= 65536, "C %d", c.C);
    FUZZ_CHECK(c.NH >= 1 && c.NH <= 512 && c.NKV >= 1 && c.NH % c.NKV == 0, "NH %d NKV %d",
               c.NH, c.NKV);
    FUZZ_CHECK(c.HS >= 1 && c.HS <= 1024, "HS %d", c.HS);
    FUZZ_CHECK(c.L >= 1 && c.L <= 512, "L %d", c.L);
    FUZZ_CHECK(c.FF >= 1 && c.FF <= 262144, "FF %d", c.FF);
    FUZZ_CHECK(c.norm_eps > 0 && c.norm_eps < 1, "norm_eps %g", (double)c.norm_eps);
    FUZZ_CHECK(c.bos_id >= -1 && c.bos_id < c.V, "bos %d of %d", c.bos_id, c.V);
    for (int i = 0; i < c.n_eos; i++)
        FUZZ_CHECK(c.eos_ids[i] >= 0 && c.eos_ids[i] < c.V, "eos %d of %d", c.eos_ids[i], c.V);
    FUZZ_CHECK(model_config_n_params(&c) <= 1000000000000ull, "%llu params",
               (unsigned long long)model_config_n_params(&c));
    return 0;
}

/* check_gpu_cuda.c: the nvcc build of the GPU backend (the objects of tokentop-cuda.so, linked in;
 * gpu/gpu.mk builds it wherever nvcc is found). With a usable device it runs the shared per-op and
 * end-to-end cases there (tests/check_gpu_common.h); without one it checks what tokentop relies on
 * to fall back to the CPU: a one-line reason, and failures that leave nothing behind. */
#include <check.h>

#include <stdlib.h>

#include "gpu/gpu_plugin.h"
#include "tests/check_gpu_common.h"

#ifndef GPU_EXPECT_BUILD_INFO
#error "gpu/gpu.mk defines GPU_EXPECT_BUILD_INFO: the build string these objects were given"
#endif

START_TEST(unavailable_backend_gives_a_one_line_reason)
{
    char why[160] = "";
    ck_assert(!cuda_backend_available(why, sizeof why));
    ck_assert_msg(strncmp(why, "no CUDA device", 14) == 0, "%s", why);
    ck_assert_ptr_null(strchr(why, '\n'));
    ck_assert(!cuda_backend_available(NULL, 0));     /* no buffer: still just an answer */
}
END_TEST

START_TEST(engine_creation_fails_cleanly_without_a_device)
{
    modelgen_options o;
    modelgen_options_default(&o);
    char *dir = tu_tmpdir();
    tt_error err = {0};
    ck_assert_msg(modelgen_write(dir, &o, &err) == TT_OK, "%s", err.msg);
    model *m;
    ck_assert_msg(model_load(dir, &m, &err) == TT_OK, "%s", err.msg);
    engine *e = (engine *)1;
    tt_status s = cuda_engine_create(m, NULL, NULL, &e, &err);
    ck_assert_msg(s == TT_ERR_DEVICE, "status %d", (int)s);
    ck_assert_ptr_null(e);
    ck_assert_msg(strncmp(err.msg, "cuda: ", 6) == 0 && !strchr(err.msg, '\n'), "%s", err.msg);
    /* The CPU engine still works in the same process: nothing was left half-initialized. */
    ck_assert_msg(cpu_engine_create(m, NULL, &e, &err) == TT_OK, "%s", err.msg);
    int32_t ids[2] = {1, 2};
    ck_assert(engine_forward(e, ids, 2, 0, false, &err) == TT_OK);
    engine_free(e);
    cuda_device_info_t info;
    s = cuda_device_info(&info, &err);
    ck_assert_int_eq(s, TT_ERR_DEVICE);
    tu_free_model(m, dir);
}
END_TEST

START_TEST(build_info_names_the_nvcc_build)
{
    /* The string gpu/gpu.mk derived from this build's nvcc and CUDA_ARCHS, and nothing else. */
    ck_assert_str_eq(cuda_build_info(), GPU_EXPECT_BUILD_INFO);
    ck_assert_msg(strncmp(GPU_EXPECT_BUILD_INFO, "cuda (nvcc ", 11) == 0, "%s", GPU_EXPECT_BUILD_INFO);
}
END_TEST

START_TEST(plugin_entry_point_carries_the_backend)
{
    const gpu_plugin *p = tokentop_gpu_plugin();
    ck_assert_int_eq(p->abi, GPU_PLUGIN_ABI);
    ck_assert_uint_eq(p->size, sizeof(gpu_plugin));
    ck_assert_str_eq(p->build_info, GPU_EXPECT_BUILD_INFO);
    ck_assert(p->engine_create == cuda_engine_create);
    ck_assert(p->backend_available == cuda_backend_available);
    ck_assert(p->engine_options_default == cuda_engine_options_default);
    ck_assert(p->device_info == cuda_device_info);
    ck_assert(p->engine_get_stats == cuda_engine_get_stats);
    ck_assert(p->engine_decode_bytes == cuda_engine_decode_bytes);
    ck_assert(p->bench_format == cuda_bench_format);
}
END_TEST

START_TEST(device_info_reports_peak_bandwidth)
{
    cuda_device_info_t info;
    tt_error err = {0};
    ck_assert_msg(cuda_device_info(&info, &err) == TT_OK, "%s", err.msg);
    ck_assert(info.name[0] != 0);
    ck_assert(info.peak_bandwidth > 1e9);
    ck_assert(info.total_bytes > 0 && info.free_bytes <= info.total_bytes);
    printf("device: %s, cc %d.%d, %d SMs, %.0f MiB, %.0f GB/s peak%s\n", info.name, info.cc_major,
           info.cc_minor, info.sm_count, (double)info.total_bytes / (1 << 20), info.peak_bandwidth / 1e9,
           info.emulated ? " (emulated)" : "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_cuda");
    tu_add_case(s, "build", TU_TESTS(
            build_info_names_the_nvcc_build, plugin_entry_point_carries_the_backend));
    char why[160];
    if (cuda_backend_available(why, sizeof why)) {
        tu_add_case(s, "device", TU_TESTS(device_info_reports_peak_bandwidth));
        gt_add_common(s);
        gt_add_sequences(s);
        gt_add_families(s);
        /* cuda_backend_available() has initialised the CUDA runtime in this process, and a CUDA
         * context does not survive fork(): every forked test would fail with "initialization
         * error". On a device the tests run in this process (CK_FORK=no; a crash ends the suite,
         * and gpu_check.sh's timeout stands in for Check's). */
        setenv("CK_FORK", "no", 1);
    } else {
        printf("gpu_cuda: %s: checking the CPU fallback only\n", why);
        TCase *tc = tu_add_case(s, "fallback", TU_TESTS(
                unavailable_backend_gives_a_one_line_reason,
                engine_creation_fails_cleanly_without_a_device));
        tcase_set_timeout(tc, 60);
    }
    return tu_run_suite(s);
}

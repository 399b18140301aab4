/* check_gpu_emu.c: the CUDA backend's own source (kernels, launches, cuBLAS calls, graphs, device
 * memory) run over the host emulation (gpu/emu), against float64 references and the CPU engine;
 * plus the emulation's own guarantees (barriers, refused host pointers, guarded device memory,
 * deferred copies) and the backend's failure paths (no device, out of memory, sticky errors).
 * Linked with the emulated objects whatever the build's CUDA mode (gpu/gpu.mk). */
#include <check.h>
#include <signal.h>

#include "gpu/emu/cuda_emu_ctl.h"

#define GT_QUIET() cuda_emu_set_quiet(1)
#define GT_BATCH_BITWISE           /* every kernel row-independent, the GEMM in k order per element */
#include "tests/check_gpu_common.h"

/* cudaError_t / cublasStatus_t values the probes return (the real API's numbers). */
enum {
    ERR_INVALID_CONFIGURATION = 9,
    ERR_ILLEGAL_ADDRESS = 700,
    ERR_CAPTURE_UNSUPPORTED = 900,
    ERR_CAPTURE_INVALIDATED = 901,
    BLAS_EXECUTION_FAILED = 13,
};

/* ---------------------------------------------------------------------------------------------
 * The emulation itself */

START_TEST(shared_memory_needs_the_barrier)
{
    /* Thread i reads what thread i+1 wrote. With __syncthreads every order gives i+1 squared;
     * without it the emulation runs thread i before thread i+1 has written (ascending order) or
     * the wrap-around read sees garbage (descending), so the race shows instead of hiding. */
    const int n = 64;
    int out[64];
    for (int order = 0; order < 2; order++) {
        cuda_emu_set_thread_order(order);
        ck_assert_int_eq(cuda_selftest_shared_neighbour(n, 1, out), 0);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(out[i], ((i + 1) % n) * ((i + 1) % n));
        ck_assert_int_eq(cuda_selftest_shared_neighbour(n, 0, out), 0);
        int right = 0;
        for (int i = 0; i < n; i++)
            right += out[i] == ((i + 1) % n) * ((i + 1) % n);
        ck_assert_msg(right < n, "order %d: the missing barrier went unnoticed", order);
    }
}
END_TEST

START_TEST(reductions_agree_in_both_thread_orders)
{
    rng r;
    rng_seed(&r, 3);
    float *in = gt_random(&r, 2 * 777, -1, 1, TT_F32);
    float s0[2], m0[2], s1[2], m1[2];
    cuda_emu_set_thread_order(0);
    ck_assert_int_eq(cuda_selftest_block_reduce(in, 777, 2, 256, s0, m0), 0);
    cuda_emu_set_thread_order(1);
    ck_assert_int_eq(cuda_selftest_block_reduce(in, 777, 2, 256, s1, m1), 0);
    ck_assert(memcmp(s0, s1, sizeof s0) == 0 && memcmp(m0, m1, sizeof m0) == 0);
    free(in);
}
END_TEST

START_TEST(host_pointer_passed_to_a_kernel_is_refused)
{
    cuda_emu_set_quiet(1);         /* the diagnostic is expected */
    ck_assert_int_eq(cuda_selftest_host_pointer_launch(), ERR_ILLEGAL_ADDRESS);
    ck_assert_msg(strstr(cuda_emu_last_diagnostic(), "not device memory") != NULL, "%s",
                  cuda_emu_last_diagnostic());
    /* As on a device, the error is sticky. */
    float sums[1], maxes[1], in[32] = {0};
    ck_assert_int_eq(cuda_selftest_block_reduce(in, 32, 1, 32, sums, maxes), ERR_ILLEGAL_ADDRESS);
}
END_TEST

START_TEST(host_read_of_device_memory_faults)
{
    signal(SIGSEGV, SIG_DFL);      /* the default action, also under AddressSanitizer */
    cuda_selftest_host_deref();    /* SIGSEGV: device memory is not mapped for the host */
}
END_TEST

START_TEST(pinned_copy_lands_at_synchronize)
{
    int before = 0, after = 0;
    ck_assert_int_eq(cuda_selftest_pinned_before_sync(&before, &after), 0);
    ck_assert_int_eq(before, -1);
    ck_assert_int_eq(after, 42);
}
END_TEST

START_TEST(nonblocking_stream_does_not_wait_for_the_legacy_stream)
{
    /* The hazard the engine's setup guards against with cudaDeviceSynchronize: weights uploaded
     * with cudaMemcpy, then read by kernels on a cudaStreamNonBlocking stream. */
    int seen = 0;
    ck_assert_int_eq(cuda_selftest_nonblocking_order(0, &seen), 0);
    ck_assert_int_ne(seen, 42);
    ck_assert_int_eq(cuda_selftest_nonblocking_order(1, &seen), 0);
    ck_assert_int_eq(seen, 42);
}
END_TEST

START_TEST(oversized_block_is_an_invalid_configuration)
{
    cuda_emu_set_quiet(1);         /* the diagnostic is expected */
    ck_assert_int_eq(cuda_selftest_bad_config(), ERR_INVALID_CONFIGURATION);
}
END_TEST

START_TEST(synchronize_while_capturing_invalidates_the_capture)
{
    int sync = 0;
    ck_assert_int_eq(cuda_selftest_capture_sync(&sync), ERR_CAPTURE_INVALIDATED);
    ck_assert_int_eq(sync, ERR_CAPTURE_UNSUPPORTED);
}
END_TEST

START_TEST(gemm_past_its_allocation_is_caught)
{
    cuda_emu_set_quiet(1);         /* the diagnostic is expected */
    /* A (4 x 2, lda 4) needs 8 elements; the buffer holds 6. */
    float A[8] = {0}, B[4] = {0}, C[8] = {0};
    int rc = cuda_selftest_gemm(0, 0, 4, 2, 2, 1.0f, A, 6, 4, 0, B, 4, 2, 0, 0.0f, C, 8, 4, 0, 1, TT_F32, TT_F32);
    ck_assert_int_eq(rc, BLAS_EXECUTION_FAILED);
    ck_assert_msg(strstr(cuda_emu_last_diagnostic(), "A (") != NULL, "%s", cuda_emu_last_diagnostic());
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The backend's failure paths */

/* The tiny model, loaded once for the case (its tests run on engines of their own). */
static model *tiny;
static char *tiny_dir;

static void tiny_setup(void) { tiny = gt_load(&gt_tiny, &tiny_dir); }
static void tiny_teardown(void) { tu_free_model(tiny, tiny_dir); }

START_TEST(no_device_means_cpu_with_a_reason)
{
    cuda_emu_set_device_count(0);
    char why[160] = "";
    ck_assert(!cuda_backend_available(why, sizeof why));
    ck_assert_str_eq(why, "no CUDA device");
    tt_error err = {0};
    engine *e = (engine *)1;
    ck_assert_int_eq(cuda_engine_create(tiny, NULL, NULL, &e, &err), TT_ERR_DEVICE);
    ck_assert_ptr_null(e);
    ck_assert_str_eq(err.msg, "cuda: no CUDA device");
    cuda_device_info_t info;
    ck_assert_int_eq(cuda_device_info(&info, &err), TT_ERR_DEVICE);
}
END_TEST

START_TEST(out_of_device_memory_says_needed_and_free)
{
    cuda_emu_set_memory((size_t)32 << 20);   /* 32 MiB: the cuBLAS workspace alone, not the rest */
    tt_error err = {0};
    engine_options eo = gt_engine_options(TT_F16);
    engine *e;
    cuda_emu_stats before, after;
    cuda_emu_get_stats(&before);
    ck_assert_int_eq(cuda_engine_create(tiny, &eo, NULL, &e, &err), TT_ERR_DEVICE);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(err.msg, "in fp16 needs ") && strstr(err.msg, " MiB of device memory (weights ") &&
                  strstr(err.msg, " MiB free of 32 MiB on host emulation (gpu/emu)"), "%s", err.msg);
    cuda_emu_get_stats(&after);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);     /* nothing left behind */
    /* With room, the same model loads. */
    cuda_emu_set_memory((size_t)1 << 30);
    e = gt_engine(tiny, &eo, NULL);
    engine_free(e);
    cuda_emu_get_stats(&after);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
}
END_TEST

START_TEST(sticky_error_stops_the_engine_with_one_message)
{
    cuda_emu_set_quiet(1);         /* the diagnostic is expected */
    tt_error err = {0};
    cuda_engine_options co;
    cuda_engine_options_default(&co);
    co.use_graphs = _i == 0;
    engine *e = gt_engine(tiny, NULL, &co);
    int32_t ids[4] = {1, 2, 3, 4};
    ck_assert(engine_forward(e, ids, 3, 0, false, &err) == TT_OK);
    ck_assert(engine_forward(e, ids + 3, 1, 3, false, &err) == TT_OK);
    cuda_emu_inject_fault(5);      /* a kernel of the next step faults */
    ck_assert_int_eq(engine_forward(e, ids, 1, 4, false, &err), TT_ERR_DEVICE);
    ck_assert_msg(strstr(err.msg, "an illegal memory access was encountered (cudaErrorIllegalAddress)") &&
                  strstr(err.msg, "failed at gpu/cuda_engine.cu:"), "%s", err.msg);
    ck_assert_int_eq(e->n_past, 4);                 /* the cache keeps what it had */
    ck_assert_int_eq(e->n_logits, 0);
    char first[TT_ERROR_MAX];
    snprintf(first, sizeof first, "%s", err.msg);
    /* Later calls fail at once with the same story, without touching the device. */
    cuda_emu_stats a, b;
    cuda_emu_get_stats(&a);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(engine_forward(e, ids, 2, 0, false, &err), TT_ERR_DEVICE);
        ck_assert_msg(strstr(err.msg, "stopped after an earlier error") && strstr(err.msg, first), "%s",
                      err.msg);
    }
    cuda_emu_get_stats(&b);
    ck_assert_int_eq(b.api_calls, a.api_calls);
    engine_free(e);
    /* The context is poisoned: a new engine says so instead of crashing. */
    ck_assert_int_eq(cuda_engine_create(tiny, NULL, &co, &e, &err), TT_ERR_DEVICE);
    ck_assert_ptr_null(e);
}
END_TEST

START_TEST(sequences_past_device_memory_are_refused_and_change_nothing)
{
    /* Room for two more sequences' caches, not three: reserving 4 sequences fails with the sizes,
     * gives back the two it made, and 3 then fit. */
    tt_error err = {0};
    engine *e = gt_engine(tiny, NULL, NULL);
    cuda_engine_stats st;
    ck_assert(cuda_engine_get_stats(e, &st));
    cuda_emu_stats before, after;
    cuda_emu_get_stats(&before);
    cuda_emu_set_memory(before.bytes_in_use + 2 * st.sequence_bytes + st.sequence_bytes / 2);
    size_t mem = e->memory_bytes;
    ck_assert_int_eq(engine_seq_reserve(e, 4, &err), TT_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "cuda: 4 sequences need ") && strstr(err.msg, " MiB more device memory for "
                  "their KV caches (") && strstr(err.msg, "64 positions in fp32); sequence 3 does not fit: ") &&
                  strstr(err.msg, " MiB free of "), "%s", err.msg);
    ck_assert_int_eq(engine_seq_count(e), 1);
    ck_assert_uint_eq(e->memory_bytes, mem);
    cuda_emu_get_stats(&after);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
    ck_assert_msg(engine_seq_reserve(e, 3, &err) == TT_OK, "%s", err.msg);
    ck_assert_uint_eq(e->memory_bytes, mem + 2 * st.sequence_bytes);
    int32_t ids[3] = {1, 2, 3};
    int seqs[3] = {0, 1, 2};
    ck_assert_msg(engine_forward_batch(e, seqs, ids, 3, &err) == TT_OK, "%s", err.msg);
    engine_free(e);
    cuda_emu_get_stats(&after);
    ck_assert_uint_lt(after.bytes_in_use, before.bytes_in_use);   /* the engine's memory is all back */
}
END_TEST

START_TEST(batched_step_of_b_rows_is_captured_once_per_b)
{
    /* One graph per batch size serves any sequences at any positions: after B = 3, 2 and 1 were
     * captured, steps of those sizes on other sequences launch nothing from the host. */
    tt_error err = {0};
    engine *e = gt_engine(tiny, NULL, NULL);
    ck_assert(engine_seq_reserve(e, 3, &err) == TT_OK);
    int three[3] = {2, 0, 1}, two[2] = {1, 2};
    int32_t ids[3] = {10, 20, 30};
    ck_assert(engine_forward_batch(e, three, ids, 3, &err) == TT_OK);
    ck_assert(engine_forward_batch(e, three, ids, 2, &err) == TT_OK);
    ck_assert(engine_forward(e, ids, 1, 2, false, &err) == TT_OK);
    cuda_emu_stats a, b;
    cuda_emu_get_stats(&a);
    ck_assert(engine_forward_batch(e, two, ids, 2, &err) == TT_OK);
    ck_assert(engine_seq_forward(e, 1, ids, 1, 2, false, &err) == TT_OK);
    ck_assert(engine_forward_batch(e, three, ids, 3, &err) == TT_OK);
    cuda_emu_get_stats(&b);
    ck_assert_int_eq(b.kernel_launches, a.kernel_launches);
    ck_assert_int_eq(b.graph_launches - a.graph_launches, 3);
    ck_assert_int_eq(engine_seq_len(e, 0), 4);
    ck_assert_int_eq(engine_seq_len(e, 1), 4);
    ck_assert_int_eq(engine_seq_len(e, 2), 4);
    engine_free(e);
}
END_TEST

START_TEST(decode_step_is_captured_once_and_replayed)
{
    tt_error err = {0};
    engine *e = gt_engine(tiny, NULL, NULL);
    int32_t ids[2] = {10, 20};
    ck_assert(engine_forward(e, ids, 2, 0, false, &err) == TT_OK);
    ck_assert(engine_forward(e, ids, 1, 2, false, &err) == TT_OK);     /* captures, replays */
    cuda_emu_stats a, b;
    cuda_emu_get_stats(&a);
    for (int s = 0; s < 5; s++)
        ck_assert(engine_forward(e, ids + 1, 1, 3 + s, false, &err) == TT_OK);
    cuda_emu_get_stats(&b);
    ck_assert_int_eq(b.kernel_launches, a.kernel_launches);          /* no launch from the host */
    ck_assert_int_eq(b.graph_launches - a.graph_launches, 5);
    ck_assert(b.graph_nodes_run - a.graph_nodes_run >= 5 * 10);
    ck_assert_msg(strstr(e->description, "cuda: host emulation (gpu/emu), fp32 weights, graphs on"), "%s",
                  e->description);
    engine_free(e);
}
END_TEST

START_TEST(kernels_give_the_same_logits_in_both_thread_orders)
{
    /* A race between threads of a block would make the result depend on their order. */
    tt_error err = {0};
    engine_options eo = gt_engine_options(gt_dtypes[_i]);
    const int V = tiny->config.V;
    float *logits[2];
    for (int order = 0; order < 2; order++) {
        cuda_emu_set_thread_order(order);
        engine *e = gt_engine(tiny, &eo, NULL);
        int32_t ids[6] = {7, 70, 170, 270, 370, 470};
        ck_assert(engine_forward(e, ids, 5, 0, false, &err) == TT_OK);
        ck_assert(engine_forward(e, ids + 5, 1, 5, false, &err) == TT_OK);
        logits[order] = malloc((size_t)V * sizeof(float));
        memcpy(logits[order], engine_logits(e, 0), (size_t)V * sizeof(float));
        engine_free(e);
    }
    ck_assert(memcmp(logits[0], logits[1], (size_t)V * sizeof(float)) == 0);
    free(logits[0]);
    free(logits[1]);
}
END_TEST

START_TEST(device_info_describes_the_emulated_device)
{
    cuda_device_info_t info;
    tt_error err = {0};
    ck_assert_msg(cuda_device_info(&info, &err) == TT_OK, "%s", err.msg);
    ck_assert(info.emulated);
    ck_assert_str_eq(info.name, "host emulation (gpu/emu)");
    ck_assert_int_eq(info.count, 1);
    ck_assert(info.peak_bandwidth == 2.0 * 1e9 * 256 / 8);  /* 1 GHz, 256-bit, double data rate */
    ck_assert(info.free_bytes <= info.total_bytes);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_emu");
    TCase *tc = tu_add_case(s, "emulation", TU_TESTS(
            shared_memory_needs_the_barrier, reductions_agree_in_both_thread_orders,
            host_pointer_passed_to_a_kernel_is_refused, pinned_copy_lands_at_synchronize,
            nonblocking_stream_does_not_wait_for_the_legacy_stream,
            oversized_block_is_an_invalid_configuration,
            synchronize_while_capturing_invalidates_the_capture, gemm_past_its_allocation_is_caught));
    tcase_add_test_raise_signal(tc, host_read_of_device_memory_faults, SIGSEGV);
    tcase_set_timeout(tc, 60);

    tc = tu_add_case(s, "failures", TU_TESTS(
            no_device_means_cpu_with_a_reason, out_of_device_memory_says_needed_and_free,
            decode_step_is_captured_once_and_replayed, device_info_describes_the_emulated_device));
    tcase_add_loop_test(tc, sticky_error_stops_the_engine_with_one_message, 0, 2);
    tcase_add_test(tc, sequences_past_device_memory_are_refused_and_change_nothing);
    tcase_add_test(tc, batched_step_of_b_rows_is_captured_once_per_b);
    tcase_add_loop_test(tc, kernels_give_the_same_logits_in_both_thread_orders, 0, 3);
    tcase_add_unchecked_fixture(tc, tiny_setup, tiny_teardown);
    tcase_set_timeout(tc, 120);

    gt_add_common(s);
    gt_add_sequences(s);
    gt_add_families(s);
    return tu_run_suite(s);
}

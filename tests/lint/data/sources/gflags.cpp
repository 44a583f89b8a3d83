#include <gflags/gflags.h>
DEFINE_int32(prefill_interleave, 0, "decode-only steps held after each chunk step");
DEFINE_int64(max_num_batched_tokens, 4096, "token budget of one step");
DEFINE_string(checkpoint_policy, "geometric-backoff", "retention: geometric-backoff | tip-only | keep-all");
DEFINE_bool(enable_prefix_cache, true, "reuse prefixes");

static bool ValidateInterleave(const char* flagname, int32_t value) {
  if (value < 0 || value > 16) {
    printf("Invalid value for --%s: %d\n", flagname, (int)value);
    return false;
  }
  return true;
}
DEFINE_validator(prefill_interleave, &ValidateInterleave);

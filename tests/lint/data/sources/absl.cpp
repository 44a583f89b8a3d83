#include "absl/flags/flag.h"
ABSL_FLAG(int32_t, prefill_interleave, 0, "decode-only steps held after each chunk step");
ABSL_FLAG(std::string, checkpoint_policy, "geometric-backoff", "checkpoint retention");
ABSL_FLAG(int64_t, max_num_batched_tokens, 4096, "token budget");

absl::Status Validate() {
  const std::string policy = absl::GetFlag(FLAGS_checkpoint_policy);
  if (policy != "geometric-backoff" && policy != "tip-only" && policy != "keep-all") {
    return absl::InvalidArgumentError(absl::StrCat("--checkpoint-policy: unknown '", policy,
                                                   "', valid values are geometric-backoff, tip-only and keep-all"));
  }
  if (absl::GetFlag(FLAGS_max_num_batched_tokens) < 64) {
    return absl::InvalidArgumentError("--max-num-batched-tokens must be at least 64");
  }
  return absl::OkStatus();
}

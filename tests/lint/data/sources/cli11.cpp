#include <CLI/CLI.hpp>
void AddServeOptions(CLI::App& app, Config& cfg) {
  app.add_option("--prefill-interleave", cfg.prefill_interleave, "decode-only steps held")
      ->check(CLI::Range(0, 16));
  app.add_option("--max-num-batched-tokens", cfg.max_num_batched_tokens, "token budget")
      ->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-policy", cfg.checkpoint_policy, "retention")
      ->check(CLI::IsMember({"geometric-backoff", "tip-only", "keep-all"}));
  app.add_flag("--enable-prefix-cache", cfg.prefix_cache, "reuse prefixes");
}

static struct option long_options[] = {
    {"prefill-interleave", required_argument, 0, 'i'},
    {"checkpoint-policy", required_argument, 0, 'p'},
    {"max-num-batched-tokens", required_argument, 0, 'b'},
    {0, 0, 0, 0}};

int parse(int argc, char** argv, struct config* c) {
  int opt;
  while ((opt = getopt_long(argc, argv, "i:p:b:", long_options, NULL)) != -1) {
    switch (opt) {
      case 'i':
        c->prefill_interleave = atoi(optarg);
        if (c->prefill_interleave < 0) { fprintf(stderr, "--prefill-interleave must be >= 0\n"); return 1; }
        break;
      case 'p':
        if (strcmp(optarg, "geometric-backoff") && strcmp(optarg, "tip-only") && strcmp(optarg, "keep-all")) {
          fprintf(stderr, "--checkpoint-policy: expected one of: geometric-backoff, tip-only, keep-all\n");
          return 1;
        }
        break;
    }
  }
  return 0;
}

"""The benchmarks, one package per family (overhead, quality, hostile, real_upstream, soak,
mutation, agents; common holds what several share). See bench/README.md."""

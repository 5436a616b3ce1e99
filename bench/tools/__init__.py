"""Tool definitions within a budget (`defer_tools` and `find_tools`): tokens per request with and
without the step, the latency a search round adds, and the ranking's hit rate."""

"""Mutation testing with mutmut over the engine, the chat format adapter, the stores, the read tool
and the SSE code (`run.sh`, slow, outside CI), its slow pass (`slow`) and what survived
(`survivors.md`). See bench/mutation/README.md."""

"""A real upstream nobody here wrote: llama.cpp's server with a small window, driven past it
directly and through ctxproxy (`run.sh`, which builds its own venv). See
bench/real_upstream/README.md."""

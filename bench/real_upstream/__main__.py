"""`python -m bench.real_upstream` prints the family's commands; the run itself is a shell script
that builds a venv with llama.cpp (several minutes the first time), so it is not started from here:

    bash bench/real_upstream/run.sh                  # the run (environment: see the script)
    python -m bench.real_upstream.facts [--turns 24] # the extract's share of its facts, no server
    python -m bench.real_upstream.driver --help      # the driver run.sh calls (in the llama venv)

See bench/real_upstream/README.md and RESULTS.md.
"""

if __name__ == "__main__":
    print(__doc__.rstrip())

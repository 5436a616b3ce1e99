"""Policy quality: how well each preset (and three baselines) prepares long, seeded agent
conversations at small, medium and large budgets; and the dry-run snapshot that checks a refactor
prepares every request to the same bytes. See bench/quality/README.md."""

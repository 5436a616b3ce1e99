"""What several bench families share: a `ctxproxy serve` subprocess on a free loopback port."""

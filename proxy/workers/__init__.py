"""`ctxproxy serve --workers N`: N processes on one port (`supervisor`, `listen`), each worker's
line to the supervisor (`link`) and the `/metrics` they answer together (`peers`, `merge`)."""

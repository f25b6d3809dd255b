"""The MCP client: server configuration (`config`), one connection a server (`connection`),
the pool that is the catalog's MCP source (`pool`), and what travels over a connection
(`features`, `sampling`, `results`, `logs`, `status`, `cache`)."""

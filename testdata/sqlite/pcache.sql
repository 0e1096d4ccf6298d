-- A short script of inserts, an index and deletes (issue 20): at its peak,
-- most live bytes are SQLite's page cache, which Debian's libsqlite3
-- reaches through stripped static functions (cmd/memtrace/e2e_sqlite_peak_test.go).
-- Run: sqlite3 -batch :memory: ".read pcache.sql"   (prints 10000)
CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, 'name-' || i, i * 7 % 1000 FROM n;
CREATE INDEX t_v ON t(v);
DELETE FROM t WHERE id % 2 = 0;
SELECT count(*) FROM t;

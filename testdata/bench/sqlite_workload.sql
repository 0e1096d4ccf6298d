-- sqlite_workload.sql: membench's fallback real workload (used only when
-- testdata/sqlite/workload.sql does not exist). Deterministic: no random(),
-- so every run does the same allocator calls. Run as
--   sqlite3 -batch :memory: ".read sqlite_workload.sql"
-- Under a second untraced on a 2-core machine; about 1.5 million allocations.
PRAGMA cache_size = -8000;

CREATE TABLE items (id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, body TEXT, price REAL);

-- 200k rows of varied-length strings (printf and substr allocate per row).
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
INSERT INTO items (grp, name, body, price)
SELECT i % 997,
       printf('item-%08d-%s', i, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26)),
       substr(printf('%.*c', 16 + (i * 7919) % 400, 'x'), 1),
       (i * 31 % 10007) / 100.0
FROM n;

CREATE INDEX items_grp ON items (grp, price);
CREATE INDEX items_name ON items (name);

-- Aggregation, sorting and string building.
SELECT grp, count(*), sum(price), max(length(body)) FROM items GROUP BY grp ORDER BY 3 DESC LIMIT 5;
SELECT count(*) FROM (SELECT group_concat(name, ',') AS g FROM items GROUP BY grp) WHERE length(g) > 1000;
SELECT name FROM items WHERE name LIKE 'item-0001%k%' ORDER BY price DESC LIMIT 3;

-- A self-join through the index.
SELECT count(*) FROM items a JOIN items b ON a.grp = b.grp AND b.id = a.id + 997 WHERE a.price > 50;

-- Updates that rewrite strings, and deletes that free pages.
UPDATE items SET body = upper(body) || name WHERE id % 3 = 0;
DELETE FROM items WHERE id % 5 = 0;
SELECT count(*), sum(length(body)) FROM items;

-- JSON building and parsing: many small allocations.
SELECT count(*) FROM (SELECT json_object('id', id, 'name', name, 'tags', json_array(grp, price)) AS j
                      FROM items WHERE id % 4 = 1) WHERE json_extract(j, '$.tags[0]') < 500;

DROP INDEX items_name;
VACUUM;

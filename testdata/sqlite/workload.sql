-- Deterministic workload for comparing memtrace with heaptrack on sqlite3
-- (scripts/compare-heaptrack.sh, cmd/memtrace/e2e_sqlite_test.go).
-- Run: sqlite3 -batch :memory: ".read workload.sql"   (prints 11 short lines)
-- Every value is derived from integers, so each run allocates the same way.
PRAGMA cache_size = -16384;

CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, score REAL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER NOT NULL REFERENCES customers(id),
                     item TEXT NOT NULL, qty INTEGER NOT NULL, price REAL NOT NULL, note TEXT);

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 8000)
INSERT INTO customers (id, name, city, score)
SELECT i, 'customer-' || i || '-' || substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26),
       'city-' || (i % 97), (i * 7919 % 1000) / 10.0
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)
INSERT INTO orders (id, customer, item, qty, price, note)
SELECT i, 1 + (i * 31 % 8000), 'item-' || (i * 13 % 1500), 1 + i % 9, (i * 104729 % 100000) / 100.0,
       CASE WHEN i % 5 = 0 THEN printf('%.*c', 20 + i % 200, 'x') ELSE NULL END
FROM n;

CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_item ON orders(item, qty);
CREATE INDEX customers_city ON customers(city);

-- Joins, aggregates, sorts and window functions: sorters, temporary b-trees.
CREATE TEMP TABLE city_totals AS
SELECT c.city, count(*) AS n, sum(o.qty * o.price) AS total, avg(c.score) AS avg_score
FROM orders o JOIN customers c ON c.id = o.customer
GROUP BY c.city;

CREATE TEMP TABLE top_items AS
SELECT item, sum(qty) AS q, group_concat(DISTINCT customer) AS buyers
FROM orders GROUP BY item ORDER BY q DESC, item LIMIT 200;

CREATE TEMP TABLE wide AS
SELECT o.id, c.name || '/' || o.item || '/' || coalesce(o.note, '') AS label, o.price * o.qty AS amount
FROM orders o JOIN customers c ON c.id = o.customer;

SELECT count(*), round(sum(total), 2) FROM city_totals;
SELECT count(*), sum(length(buyers)) FROM top_items;
SELECT count(DISTINCT o1.customer)
FROM orders o1 JOIN orders o2 ON o1.customer = o2.customer AND o1.id < o2.id
WHERE o1.item = o2.item;
SELECT count(*) FROM (SELECT customer, item, row_number() OVER (PARTITION BY customer ORDER BY price DESC) AS r
                      FROM orders) WHERE r = 1;
SELECT sum(length(label)) FROM (SELECT label FROM wide ORDER BY upper(label) DESC, amount LIMIT 20000);
SELECT count(*) FROM (SELECT DISTINCT substr(label, 1, 14) FROM wide);
CREATE INDEX wide_label ON wide(label);
SELECT count(*) FROM wide w1 WHERE EXISTS (SELECT 1 FROM wide w2 WHERE w2.label > w1.label AND w2.amount < w1.amount LIMIT 1);
SELECT count(*) FROM orders o WHERE price > (SELECT avg(price) FROM orders WHERE customer = o.customer);
SELECT group_concat(city, ',') FROM (SELECT city FROM customers GROUP BY city ORDER BY sum(score) DESC LIMIT 5);

-- Updates and deletes, then rebuild the database.
UPDATE orders SET note = printf('%.*c', 50 + id % 100, 'y'), qty = qty + 1 WHERE id % 3 = 0;
UPDATE customers SET score = score * 1.1, name = upper(name)
WHERE city IN (SELECT city FROM city_totals WHERE n > 500);
DELETE FROM orders WHERE id % 7 = 0;
DELETE FROM customers WHERE id NOT IN (SELECT customer FROM orders);
DROP TABLE wide;
DROP INDEX orders_item;
VACUUM;

SELECT count(*), sum(qty), round(sum(price), 2), sum(length(note)) FROM orders;
SELECT count(*) FROM customers;

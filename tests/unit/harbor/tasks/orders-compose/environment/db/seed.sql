CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL);
INSERT INTO orders VALUES (1001, 'delivered'), (1002, 'pending'), (1003, 'shipped');

CREATE TABLE orders (
    id integer PRIMARY KEY,
    customer text NOT NULL,
    item text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'shipped', 'delivered', 'cancelled'))
);
INSERT INTO orders VALUES
    (1001, 'ada', 'kettle', 'delivered'),
    (1002, 'grace', 'toaster', 'pending'),
    (1003, 'linus', 'mug', 'shipped');

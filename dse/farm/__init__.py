"""Board farms: the inventory of physical boards and the lease a measuring job holds on one of them."""

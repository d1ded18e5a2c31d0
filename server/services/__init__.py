"""Services: the Engine's typed attributes, one per capability. Each wires core logic to the stores; tools call them."""

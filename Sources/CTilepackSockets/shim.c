// The header holds everything (static inline); this file makes the target a C library.

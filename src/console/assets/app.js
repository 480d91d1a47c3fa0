/* The console pages (placeholder). */

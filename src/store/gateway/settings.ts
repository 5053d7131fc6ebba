// Names of rows in the store's settings table.

/** Settings key holding the scrypt hash of a generated admin secret. */
export const ADMIN_SECRET_SETTING = 'console.admin_secret_hash';

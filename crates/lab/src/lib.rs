pub mod dns_compare;

/* etcd_lease.c: being written. */

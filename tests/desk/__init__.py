"""The subject-request desk: intake, requests and their actions, tenant-scoped officers."""

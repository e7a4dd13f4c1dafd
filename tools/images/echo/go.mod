module k8s-arch-lab.local/echo

go 1.22

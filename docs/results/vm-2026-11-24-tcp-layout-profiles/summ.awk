# medians per build and shape of cpu-ab.txt: GB/s, CPU ms per op (initiator, target)
function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
!/^#/ && NF >= 6 { k = $2 " " $3; n[k]++; bw[k, n[k]] = $4; ci[k, n[k]] = $5; ct[k, n[k]] = $6 }
END { for (k in n) { m = n[k]; for (i = 1; i <= m; i++) { a[i] = bw[k, i]; b[i] = ci[k, i]; c[i] = ct[k, i] }
    x = med(a, m); for (i = 1; i <= m; i++) a[i] = b[i]; y = med(a, m); for (i = 1; i <= m; i++) a[i] = c[i]; z = med(a, m)
    printf "%-26s runs %d  median GB/s %.3f  CPU ms/op initiator %.2f target %.2f\n", k, m, x, y, z } }

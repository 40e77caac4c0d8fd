#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__attribute__((target("avx2"))) static inline void avx2_copy(void *d, const void *s, size_t n){
  char *dp=d; const char *sp=s;
  while(n>=128){
    __m256i a=_mm256_loadu_si256((const __m256i*)sp),b=_mm256_loadu_si256((const __m256i*)(sp+32)),
            c=_mm256_loadu_si256((const __m256i*)(sp+64)),e=_mm256_loadu_si256((const __m256i*)(sp+96));
    _mm256_storeu_si256((__m256i*)dp,a);_mm256_storeu_si256((__m256i*)(dp+32),b);
    _mm256_storeu_si256((__m256i*)(dp+64),c);_mm256_storeu_si256((__m256i*)(dp+96),e);
    sp+=128;dp+=128;n-=128;}
  if(n) memcpy(dp,sp,n);
}
__attribute__((target("avx512f"))) static inline void avx512_copy(void *d, const void *s, size_t n){
  char *dp=d; const char *sp=s;
  while(n>=256){
    __m512i a=_mm512_loadu_si512(sp),b=_mm512_loadu_si512(sp+64),c=_mm512_loadu_si512(sp+128),e=_mm512_loadu_si512(sp+192);
    _mm512_storeu_si512(dp,a);_mm512_storeu_si512(dp+64,b);_mm512_storeu_si512(dp+128,c);_mm512_storeu_si512(dp+192,e);
    sp+=256;dp+=256;n-=256;}
  if(n) memcpy(dp,sp,n);
}
static inline void movsb(void *d,const void*s,size_t n){ __asm__ volatile("rep movsb":"+D"(d),"+S"(s),"+c"(n)::"memory"); }
int main(int argc,char**argv){
  size_t sz=argc>1?strtoull(argv[1],0,0):16384, cnt=argc>2?strtoull(argv[2],0,0):4096, gapm=argc>3?strtoull(argv[3],0,0):2;
  size_t zone=gapm*sz*cnt;
  char *src=mmap(0,zone,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);
  char *dst=mmap(0,zone,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);
  memset(src,1,zone);memset(dst,2,zone);
  for(int round=0;round<3;round++){
    double best[5]={1e9,1e9,1e9,1e9,1e9};
    for(int it=0;it<(sz*cnt<(1<<20)?2000:10);it++){
      double t=now(); memcpy(dst,src,sz*cnt); t=now()-t; if(t<best[0])best[0]=t;
      t=now(); for(size_t i=0;i<cnt;i++) memcpy(dst+gapm*i*sz,src+gapm*i*sz,sz); t=now()-t; if(t<best[1])best[1]=t;
      t=now(); for(size_t i=0;i<cnt;i++) avx2_copy(dst+gapm*i*sz,src+gapm*i*sz,sz); t=now()-t; if(t<best[2])best[2]=t;
      t=now(); for(size_t i=0;i<cnt;i++) avx512_copy(dst+gapm*i*sz,src+gapm*i*sz,sz); t=now()-t; if(t<best[3])best[3]=t;
      t=now(); for(size_t i=0;i<cnt;i++) movsb(dst+gapm*i*sz,src+gapm*i*sz,sz); t=now()-t; if(t<best[4])best[4]=t;
    }
    printf("%zux%zu gap x%zu: contig %.2f GB/s; ratios memcpy %.2f avx2 %.2f avx512 %.2f movsb %.2f\n",cnt,sz,gapm,sz*cnt/1e9/best[0],best[0]/best[1],best[0]/best[2],best[0]/best[3],best[0]/best[4]);
  }
}

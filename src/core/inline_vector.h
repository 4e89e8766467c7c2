#pragma once
// A vector whose first N elements live inline: the per-call plans of the op
// layer (a few inputs, one to four outputs) cost no heap allocation, which
// matters on the path every small op takes. Past N the elements move to the
// heap (the multi-tensor optimizer step plans every parameter of a group in
// one call). Only the elements pushed are constructed, so unused capacity
// costs nothing.

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <utility>

namespace pyflame {

template <class T, size_t N> class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }
  InlineVector(const InlineVector& o) {
    for (const T& t : o) push_back(t);
  }
  InlineVector(InlineVector&& o) noexcept { take(o); }
  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) {
      clear();
      for (const T& t : o) push_back(t);
    }
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      clear();
      release_heap();
      take(o);
    }
    return *this;
  }
  ~InlineVector() {
    clear();
    release_heap();
  }

  void push_back(T t) {
    if (size_ == capacity_) grow();
    new (data_ + size_) T(std::move(t));
    ++size_;
  }
  void clear() {
    for (size_t i = 0; i < size_; ++i) data_[i].~T();
    size_ = 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  T* inline_slots() { return std::launder(reinterpret_cast<T*>(storage_)); }
  bool on_heap() const { return capacity_ > N; }

  void grow() {
    const size_t capacity = capacity_ * 2;
    T* heap = std::allocator<T>().allocate(capacity);
    for (size_t i = 0; i < size_; ++i) {
      new (heap + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    release_heap();
    data_ = heap;
    capacity_ = capacity;
  }
  void release_heap() {
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
    data_ = inline_slots();
    capacity_ = N;
  }
  // Takes o's elements, leaving o empty: a heap buffer changes hands, inline elements are moved.
  void take(InlineVector& o) {
    if (o.on_heap()) {
      data_ = o.data_, capacity_ = o.capacity_, size_ = o.size_;
      o.data_ = o.inline_slots(), o.capacity_ = N, o.size_ = 0;
      return;
    }
    for (T& t : o) new (data_ + size_++) T(std::move(t));
    o.clear();
  }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  T* data_ = inline_slots();
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace pyflame
